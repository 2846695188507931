import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Background analysis (`rollout.background_analysis`) through the real server and CLI, the noop
 * plugin, and a real HTTP server on loopback whose error rate the test turns bad while the rollout
 * waits: measured from the starting step, aborting mid-pause, resumed after a server kill.
 */
describe("rollout background analysis", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let server: ServerProcess;
  let artifact: string;
  let web: Server;
  let base: string;
  /** Error rate answered per application (the path's last segment). */
  const errorRate = new Map<string, number>();
  const seen: string[] = [];

  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url });
  const state = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8").catch(() => "");
  const envconfig = (app: string, rollout: Record<string, unknown>, checks: Record<string, unknown> = {}, targets?: unknown[]) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: targets ?? [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      retry_interval: "10ms",
      analysis: {
        checks: {
          errors: {
            http: { url: `${base}/errors/${app}?weight=\${MANENT_WEIGHT}`, json_field: "error_rate" },
            success_condition: "result < 0.05",
            interval: "200ms",
            failure_limit: 1,
            ...checks,
          },
        },
      },
      rollout,
    });
  const submit = async (app: string, version = "2.0.0", api = server.api) =>
    (await api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` })).id;
  const until = (id: string, ok: (d: DeployRecord) => boolean, what: string, api = server.api) => deployReaching(api, id, ok, what);
  const measured = (n: number) => (d: DeployRecord) => (d.rollout?.background?.checks[0]?.measured ?? 0) >= n;
  const events = async (id: string): Promise<DeployEvent[]> => {
    const out: DeployEvent[] = [];
    await server.api.streamEvents(`/api/v1/deploys/${id}/events`, (e) => {
      out.push(e);
      return e.type === "deploy.status" && ["succeeded", "rolled_back", "failed"].includes(e.data.status as string);
    });
    return out;
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "background\n");
    web = createServer((req, res) => {
      seen.push(req.url!);
      const app = new URL(req.url!, "http://x").pathname.split("/").at(-1)!;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error_rate: errorRate.get(app) ?? 0.01 }));
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    web?.closeAllConnections();
    web?.close();
    await pg?.stop();
  });

  it("measures from its starting step while the canary pauses, and aborts mid-pause naming the check and its value", async () => {
    await envconfig("bga", {
      canary: { steps: [{ set_weight: 10 }, { set_weight: 30 }, { pause: "1h" }, { set_weight: 100 }] },
      background_analysis: { checks: ["errors"], starting_step: 2 },
    });
    const id = await submit("bga");
    const running = await until(id, measured(2), "two background measurements");
    assert.equal(running.rollout!.waiting!.kind, "pause");
    const b = running.rollout!.background!;
    assert.equal(b.status, "running");
    assert.equal(b.starting_step, 2);
    assert.equal(b.checks[0]!.last!.verdict, "successful");
    assert.equal(b.checks[0]!.last!.value, 0.01);
    // Not measured before step 2: never at weight 10.
    assert.ok(!seen.some((u) => u === "/errors/bga?weight=10"), seen.join(" "));
    const status = await cli("status", id, "-o", "text");
    assert.match(status.stdout, /background analysis errors \(from canary step 2\): running since \S+/);
    assert.match(status.stdout, /background analysis errors: 0\.01 → successful/);

    errorRate.set("bga", 0.3);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "aborted");
    assert.match(
      d.error!.message,
      /^background analysis failed during canary step 3 \(pause 1h\): errors: error_rate = 0\.3 does not meet success_condition "result < 0\.05" \(2 failed measurements, failure_limit 1\); weight 0, candidate reverted$/,
    );
    assert.equal(d.rollout!.background!.status, "failed");
    assert.equal(d.rollout!.background!.checks[0]!.failed, 2);
    assert.equal(d.steps.find((s) => s.name === "canary-3:pause")!.status, "failed");
    assert.equal(await state("bga-1"), "");
    const stream = await events(id);
    assert.ok(
      stream.some((e) => e.type === "analysis.measured" && JSON.stringify(e.data).includes('"step":"background"')),
      "background measurements are on the event stream",
    );
    assert.ok(
      stream.some((e) => e.type === "rollout.updated" && (e.data.rollout as DeployRecord["rollout"])?.background?.status === "failed"),
    );
  });

  it("stops at the promote when the checks stay healthy", async () => {
    await envconfig("bgb", {
      canary: { steps: [{ set_weight: 20 }, { pause: "1s" }, { set_weight: 100 }] },
      background_analysis: { checks: ["errors"] },
    });
    const d = await server.api.deploy(await submit("bgb"), 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const b = d.rollout!.background!;
    assert.equal(b.status, "stopped");
    assert.ok(b.checks[0]!.measured >= 1);
    assert.equal(b.checks[0]!.failed, 0);
    assert.ok(d.rollout!.measurements.every((m) => m.step === "background" && m.verdict === "successful"));
    assert.equal(await state("bgb-1"), "2.0.0");
  });

  it("with waves: true, runs between the waves and rolls back the waves done when it fails", async () => {
    const targets = [
      { host: "bgc-eu", labels: { region: "eu" } },
      { host: "bgc-us", labels: { region: "us" } },
    ];
    await envconfig(
      "bgc",
      { waves: { by: ["region"], between: [{ pause: "1h" }] }, background_analysis: { checks: ["errors"], waves: true } },
      {},
      targets,
    );
    const id = await submit("bgc");
    const waiting = await until(id, (d) => d.rollout?.waiting?.kind === "pause" && measured(1)(d), "measured at the gate");
    assert.equal(waiting.rollout!.background!.starting_step, null);
    errorRate.set("bgc", 0.5);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.match(
      d.error!.message,
      /^after wave 1: background analysis failed during gate 1 after wave 1 \(pause 1h\): errors: error_rate = 0\.5 .*; wave 1 rolled back; wave 2 skipped$/,
    );
    assert.equal(await state("bgc-eu"), "");
    assert.equal(await state("bgc-us"), "");
  });

  it("refuses settings that would never run, naming the file and field (a dry-run too)", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { canary: { steps: [{ pause: "1s" }] }, background_analysis: { checks: ["nope"] } },
        /rollout\.background_analysis\.checks\.0: no check named "nope"/,
      ],
      [
        { canary: { steps: [{ pause: "1s" }] }, background_analysis: { checks: ["errors"], starting_step: 3 } },
        /rollout\.background_analysis\.starting_step: step 3 does not exist: the canary has 1 step/,
      ],
      [{ background_analysis: { checks: ["errors"] } }, /rollout\.background_analysis\.checks: runs during a canary/],
      [{ canary: { steps: [] }, background_analysis: { checks: [] } }, /rollout\.background_analysis\.checks/],
    ];
    for (const [rollout, why] of cases) {
      await envconfig("bgd", rollout);
      await assert.rejects(submit("bgd"), (err: Error) => /bgd\/prod\.yml/.test(err.message) && why.test(err.message));
      await ws.write("bgd.yml", descriptor("bgd", "prod", artifact, "2.0.0"));
      const dry = await cli("deploy", "-f", "bgd.yml", "--dry-run");
      assert.equal(dry.code, 2, `${dry.stdout}\n${dry.stderr}`);
      assert.match(dry.stderr, why);
    }
  });

  it("resumes after a server kill with its counts kept, and still aborts when the check turns bad", async () => {
    await server.stop();
    await envconfig("bge", {
      canary: { steps: [{ set_weight: 40 }, { pause: "1h" }] },
      background_analysis: { checks: ["errors"] },
    });
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "background:2:checkpointed" } });
    let id = "";
    try {
      id = await submit("bge", "2.0.0", doomed.api);
      const exit = await doomed.exited;
      assert.equal(exit.signal, "SIGKILL", doomed.logs().slice(-3000));
    } finally {
      await doomed.stop().catch(() => undefined);
    }
    server = await startServer(config, { cwd: ws.dir });
    const resumed = await until(id, measured(4), "two more measurements after the restart");
    const b = resumed.rollout!.background!;
    assert.equal(b.status, "running");
    // The two measurements taken before the kill still count: the counts go on from them.
    assert.ok(resumed.rollout!.measurements.filter((m) => m.step === "background").length >= 4);
    errorRate.set("bge", 0.9);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.match(d.error!.message, /^background analysis failed during canary step 2 \(pause 1h\): errors: error_rate = 0\.9 /);
    assert.equal(d.rollout!.background!.checks[0]!.measured, d.rollout!.measurements.length);
  });
});
