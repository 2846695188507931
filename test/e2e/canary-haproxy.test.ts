import assert from "node:assert/strict";
import { after, before, describe, it, type TestContext } from "node:test";
import { CanaryServer } from "../support/canary-server.js";
import { backgroundTraffic, haproxyBinary, sample, share, type Haproxy } from "../support/haproxy.js";

const tester = { "X-Canary": "always" };

/**
 * A percentage rollout through a real manent-server: the example app (examples/canary-quickstart)
 * on two local targets with two slots each, a real HAProxy on loopback, the engine driving
 * remote-copy's slot and traffic calls from the envconfig's `rollout.canary` steps. At each pause,
 * 1,000 requests through HAProxy measure the share of 1.1.0; a request loop runs across every
 * transition (weights, promote, retire, abort) and not one of its requests may fail.
 */
describe("canary rollout through manent-server, remote-copy and HAProxy", { skip: haproxyBinary ? false : "haproxy not installed" }, () => {
  const fx = new CanaryServer();
  before(() => fx.start());
  after(() => fx.stop());

  async function command(id: string, name: "promote" | "abort"): Promise<void> {
    const res = await fetch(`${fx.url}/api/v1/deploys/${id}/${name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 200, `${name}: ${await res.text()}`);
  }

  async function measure(t: TestContext, haproxy: Haproxy, load: ReturnType<typeof backgroundTraffic>, weight: number): Promise<void> {
    const s = await load.paused(() => sample(haproxy.port, 1000));
    assert.equal(s.failed, 0, s.errors.join("; "));
    const measured = share(s, "1.1.0");
    t.diagnostic(`weight ${weight}: 1.1.0 answered ${measured.toFixed(1)}% of ${s.total} requests through HAProxy`);
    assert.ok(Math.abs(measured - weight) <= 3, `1.1.0 answered ${measured}% at weight ${weight}`);
    const testers = await sample(haproxy.port, 20, tester);
    assert.deepEqual(testers.byVersion, { "1.1.0": 20 }, "testers reach the candidate");
  }

  const steps = [{ set_weight: 10 }, { pause: {} }, { set_weight: 50 }, { pause: {} }, { set_weight: 100 }, { pause: {} }];

  it("1.0.0 → 1.1.0 at 10, 50, 100: shares within ±3 points, promote, not one failed request", async (t) => {
    const { haproxy, envconfig, submit } = await fx.app("hello");
    await envconfig();
    const first = await fx.api.deploy(await submit("1.0.0"), 120);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));
    assert.deepEqual((await sample(haproxy.port, 100)).byVersion, { "1.0.0": 100 });

    await envconfig({ canary: { testers: true, steps } });
    const load = backgroundTraffic(haproxy.port);
    let id = "";
    try {
      id = await submit("1.1.0");
      for (const weight of [10, 50, 100]) {
        const d = await fx.pausedAt(id, weight);
        assert.equal(d.rollout?.canary?.testers?.["header"], "X-Canary: always");
        await measure(t, haproxy, load, weight);
        await command(id, "promote");
      }
      const done = await fx.api.deploy(id, 120);
      assert.equal(done.status, "succeeded", JSON.stringify(done.error));
      assert.equal(done.rollout?.canary?.phase, "promoted");
    } finally {
      const tally = await load.stop();
      t.diagnostic(`request loop across the rollout, promote and retire: ${tally.total} requests, ${tally.failed} failed`);
      assert.equal(tally.failed, 0, tally.errors.join("; "));
    }
    const after = await sample(haproxy.port, 1000);
    assert.deepEqual(after.byVersion, { "1.1.0": 1000 });
  });

  it("an abort at 50 ends with 100% on 1.0.0 and not one failed request", async (t) => {
    const { haproxy, envconfig, submit } = await fx.app("hola");
    await envconfig();
    const first = await fx.api.deploy(await submit("1.0.0"), 120);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));

    await envconfig({ canary: { testers: true, steps } });
    const load = backgroundTraffic(haproxy.port);
    try {
      const id = await submit("1.1.0");
      await fx.pausedAt(id, 10);
      await measure(t, haproxy, load, 10);
      await command(id, "promote");
      await fx.pausedAt(id, 50);
      await measure(t, haproxy, load, 50);
      await command(id, "abort");
      const done = await fx.api.deploy(id, 120);
      assert.notEqual(done.status, "succeeded");
      assert.equal(done.rollout?.canary?.phase, "reverted", JSON.stringify(done.rollout));
      t.diagnostic(`aborted deploy ended ${done.status}: ${done.error?.message ?? ""}`);
    } finally {
      const tally = await load.stop();
      t.diagnostic(`request loop across the rollout and the abort: ${tally.total} requests, ${tally.failed} failed`);
      assert.equal(tally.failed, 0, tally.errors.join("; "));
    }
    const after = await sample(haproxy.port, 1000);
    assert.deepEqual(after.byVersion, { "1.0.0": 1000 });
    assert.deepEqual((await sample(haproxy.port, 20, tester)).byVersion, { "1.0.0": 20 });
  });
});
