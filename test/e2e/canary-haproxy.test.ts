import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { promisify } from "node:util";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import {
  backgroundTraffic,
  freePort,
  haproxyBinary,
  sample,
  share,
  startHaproxy,
  type Haproxy,
  type SlotServer,
} from "../support/haproxy.js";
import { TestPostgres } from "../support/postgres.js";
import { repoRoot, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);
const tester = { "X-Canary": "always" };

/**
 * A percentage rollout through a real manent-server: the example app (examples/canary-quickstart)
 * on two local targets with two slots each, a real HAProxy on loopback, the engine driving
 * remote-copy's slot and traffic calls from the envconfig's `rollout.canary` steps. At each pause,
 * 1,000 requests through HAProxy measure the share of 1.1.0; a request loop runs across every
 * transition (weights, promote, retire, abort) and not one of its requests may fail.
 */
describe("canary rollout through manent-server, remote-copy and HAProxy", { skip: haproxyBinary ? false : "haproxy not installed" }, () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  const proxies: Haproxy[] = [];
  const bases: string[] = [];

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace("manent-canary-e2e-");
    await run("bash", [join(repoRoot, "examples/canary-quickstart/build.sh"), ws.path("dist")]);
    const yml = manentYml(await pg.createDatabase(), { plugins: { "remote-copy": {} } });
    server = await startServer(await ws.write("manent.yml", yml), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
    for (const p of proxies) await p.stop();
    // Stop the app processes the slots left running, by their pid files.
    for (const base of bases) {
      const runDir = join(base, "run");
      for (const f of (await readdir(runDir).catch(() => [] as string[])).filter((x) => x.endsWith(".pid"))) {
        try {
          process.kill(Number(await readFile(join(runDir, f), "utf8")), "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    if (ws) await rm(ws.dir, { recursive: true, force: true });
  });

  /** An application on two fresh targets behind its own HAProxy; its envconfig with or without the canary. */
  async function app(name: string) {
    const dir = ws.path(name);
    const servers: SlotServer[] = [];
    const targets: { host: string; labels: Record<string, string> }[] = [];
    for (const host of ["web-1", "web-2"]) {
      const blue = await freePort();
      const green = await freePort();
      targets.push({ host, labels: { slot_ports: `blue=${blue},green=${green}` } });
      servers.push({ host, slot: "blue", port: blue, live: true }, { host, slot: "green", port: green, live: false });
      bases.push(join(dir, "hosts", host));
    }
    await ws.write(`${name}/.keep`, "");
    const haproxy = await startHaproxy(dir, servers);
    proxies.push(haproxy);
    const envconfig = (rollout?: Record<string, unknown>) =>
      ws.write(`envconfig/untenanted/${name}/${name}/test.yml`, {
        plugin: "remote-copy",
        targets,
        params: {
          transport: "local",
          base: join(dir, "hosts", "{host}"),
          activate: "./activate.sh",
          deactivate: "./deactivate.sh",
          activate_timeout: "30s",
          haproxy_socket: haproxy.socket,
          haproxy_backend: haproxy.backend,
          haproxy_tester_backend: haproxy.testerBackend,
          tester_header: haproxy.testerHeader,
          drain_timeout: "20s",
        },
        rollback: { enabled: true },
        retry_interval: "100ms",
        ...(rollout && { rollout }),
      });
    const submit = async (version: string) =>
      (
        await server.api.submit({
          descriptor: {
            apiVersion: "manent/v1",
            application: name,
            environment: "test",
            artifact: { type: "tarball", name, version, source: ws.path("dist", `hello-${version}.tar.gz`) },
          },
          descriptor_file: `${name}.yml`,
        })
      ).id;
    return { haproxy, envconfig, submit };
  }

  async function command(id: string, name: "promote" | "abort"): Promise<void> {
    const res = await fetch(`${server.url}/api/v1/deploys/${id}/${name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 200, `${name}: ${await res.text()}`);
  }

  /** Polls the deploy until its canary waits at `weight` (a pause); fails if it ends first. */
  async function pausedAt(id: string, weight: number): Promise<DeployRecord> {
    for (;;) {
      const d = await server.api.deploy(id, 0);
      if (d.rollout?.waiting && d.rollout.canary?.weight === weight) return d;
      if (["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) {
        assert.fail(`deploy ${id} ended ${d.status} before pausing at weight ${weight}: ${JSON.stringify(d.error)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
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
    const { haproxy, envconfig, submit } = await app("hello");
    await envconfig();
    const first = await server.api.deploy(await submit("1.0.0"), 120);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));
    assert.deepEqual((await sample(haproxy.port, 100)).byVersion, { "1.0.0": 100 });

    await envconfig({ canary: { testers: true, steps } });
    const load = backgroundTraffic(haproxy.port);
    let id = "";
    try {
      id = await submit("1.1.0");
      for (const weight of [10, 50, 100]) {
        const d = await pausedAt(id, weight);
        assert.equal(d.rollout?.canary?.testers?.["header"], "X-Canary: always");
        await measure(t, haproxy, load, weight);
        await command(id, "promote");
      }
      const done = await server.api.deploy(id, 120);
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
    const { haproxy, envconfig, submit } = await app("hola");
    await envconfig();
    const first = await server.api.deploy(await submit("1.0.0"), 120);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));

    await envconfig({ canary: { testers: true, steps } });
    const load = backgroundTraffic(haproxy.port);
    try {
      const id = await submit("1.1.0");
      await pausedAt(id, 10);
      await measure(t, haproxy, load, 10);
      await command(id, "promote");
      await pausedAt(id, 50);
      await measure(t, haproxy, load, 50);
      await command(id, "abort");
      const done = await server.api.deploy(id, 120);
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
