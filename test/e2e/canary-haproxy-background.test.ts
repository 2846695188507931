import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { CanaryServer } from "../support/canary-server.js";
import { backgroundTraffic, haproxyBinary, sample, share } from "../support/haproxy.js";

/**
 * Background analysis aborting a canary mid-pause, with real traffic: the example app on two local
 * targets with two slots each behind a real HAProxy, remote-copy's slot and weight calls, and a
 * background check on a real HTTP endpoint (node:http) that the test turns bad during a one-hour
 * pause at weight 50. 1,000 requests measure the share at 50; a request loop runs across the
 * rollout, the abort and the revert, and not one of its requests may fail; traffic ends on 1.0.0.
 */
describe(
  "background analysis aborting a canary through manent-server, remote-copy and HAProxy",
  { skip: haproxyBinary ? false : "haproxy not installed" },
  () => {
    const fx = new CanaryServer();
    let metrics: Server;
    let metricsUrl: string;
    let errorRate = 0.01;

    before(async () => {
      await fx.start();
      metrics = createServer((_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error_rate: errorRate })),
      );
      await new Promise<void>((r) => metrics.listen(0, "127.0.0.1", r));
      metricsUrl = `http://127.0.0.1:${(metrics.address() as AddressInfo).port}/errors`;
    });
    after(async () => {
      metrics?.closeAllConnections();
      metrics?.close();
      await fx.stop();
    });

    it("a background check turned bad during a pause at 50 aborts: 100% back on 1.0.0, not one failed request", async (t) => {
      const { haproxy, envconfig, submit } = await fx.app("bghello", {
        analysis: {
          checks: {
            errors: { http: { url: metricsUrl, json_field: "error_rate" }, success_condition: "result < 0.05", interval: "250ms" },
          },
        },
      });
      await envconfig();
      const first = await fx.api.deploy(await submit("1.0.0"), 120);
      assert.equal(first.status, "succeeded", JSON.stringify(first.error));

      await envconfig({
        canary: { steps: [{ set_weight: 50 }, { pause: "1h" }, { set_weight: 100 }] },
        background_analysis: { checks: ["errors"], starting_step: 2 },
      });
      const load = backgroundTraffic(haproxy.port);
      try {
        const id = await submit("1.1.0");
        const paused = await fx.pausedAt(id, 50);
        t.diagnostic(`background analysis: ${paused.rollout?.background?.status}`);
        const s = await load.paused(() => sample(haproxy.port, 1000));
        assert.equal(s.failed, 0, s.errors.join("; "));
        const measured = share(s, "1.1.0");
        t.diagnostic(`weight 50: 1.1.0 answered ${measured.toFixed(1)}% of ${s.total} requests through HAProxy`);
        assert.ok(Math.abs(measured - 50) <= 5, `1.1.0 answered ${measured}% at weight 50`);
        for (;;) {
          const d = await fx.api.deploy(id);
          if ((d.rollout?.background?.checks[0]?.measured ?? 0) >= 1) break;
          assert.equal(d.status, "running", JSON.stringify(d.error));
          await new Promise((r) => setTimeout(r, 100));
        }

        errorRate = 0.4;
        const done = await fx.api.deploy(id, 120);
        assert.equal(done.status, "rolled_back", JSON.stringify(done.error));
        assert.match(
          done.error!.message,
          /^background analysis failed during canary step 2 \(pause 1h\): errors: error_rate = 0\.4 does not meet success_condition "result < 0\.05" \(1 failed measurement, failure_limit 0\); weight 0, candidate reverted$/,
        );
        assert.equal(done.rollout?.canary?.phase, "reverted");
        assert.equal(done.rollout?.background?.status, "failed");
        t.diagnostic(`aborted deploy: ${done.error?.message ?? ""}`);
      } finally {
        const tally = await load.stop();
        t.diagnostic(`request loop across the rollout and the abort: ${tally.total} requests, ${tally.failed} failed`);
        assert.equal(tally.failed, 0, tally.errors.join("; "));
      }
      const after = await sample(haproxy.port, 1000);
      assert.deepEqual(after.byVersion, { "1.0.0": 1000 });
    });
  },
);
