import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
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
    let pg: TestPostgres;
    let ws: Workspace;
    let server: ServerProcess;
    let metrics: Server;
    let metricsUrl: string;
    let errorRate = 0.01;
    const proxies: Haproxy[] = [];
    const bases: string[] = [];

    before(async () => {
      pg = await TestPostgres.start();
      ws = await createWorkspace("manent-canary-e2e-");
      await run("bash", [join(repoRoot, "examples/canary-quickstart/build.sh"), ws.path("dist")]);
      const yml = manentYml(await pg.createDatabase(), { plugins: { "remote-copy": {} } });
      server = await startServer(await ws.write("manent.yml", yml), { cwd: ws.dir });
      metrics = createServer((_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error_rate: errorRate })),
      );
      await new Promise<void>((r) => metrics.listen(0, "127.0.0.1", r));
      metricsUrl = `http://127.0.0.1:${(metrics.address() as AddressInfo).port}/errors`;
    });
    after(async () => {
      metrics?.closeAllConnections();
      metrics?.close();
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
          analysis: {
            checks: {
              errors: { http: { url: metricsUrl, json_field: "error_rate" }, success_condition: "result < 0.05", interval: "250ms" },
            },
          },
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

    it("a background check turned bad during a pause at 50 aborts: 100% back on 1.0.0, not one failed request", async (t) => {
      const { haproxy, envconfig, submit } = await app("bghello");
      await envconfig();
      const first = await server.api.deploy(await submit("1.0.0"), 120);
      assert.equal(first.status, "succeeded", JSON.stringify(first.error));

      await envconfig({
        canary: { steps: [{ set_weight: 50 }, { pause: "1h" }, { set_weight: 100 }] },
        background_analysis: { checks: ["errors"], starting_step: 2 },
      });
      const load = backgroundTraffic(haproxy.port);
      try {
        const id = await submit("1.1.0");
        const paused = await pausedAt(id, 50);
        t.diagnostic(`background analysis: ${paused.rollout?.background?.status}`);
        const s = await load.paused(() => sample(haproxy.port, 1000));
        assert.equal(s.failed, 0, s.errors.join("; "));
        const measured = share(s, "1.1.0");
        t.diagnostic(`weight 50: 1.1.0 answered ${measured.toFixed(1)}% of ${s.total} requests through HAProxy`);
        assert.ok(Math.abs(measured - 50) <= 5, `1.1.0 answered ${measured}% at weight 50`);
        for (;;) {
          const d = await server.api.deploy(id);
          if ((d.rollout?.background?.checks[0]?.measured ?? 0) >= 1) break;
          assert.equal(d.status, "running", JSON.stringify(d.error));
          await new Promise((r) => setTimeout(r, 100));
        }

        errorRate = 0.4;
        const done = await server.api.deploy(id, 120);
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
