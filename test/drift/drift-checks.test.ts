import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { TargetDriftRecord } from "../../src/core/drift/drift-record.js";
import { buildGoBinaries } from "../interop/go-tools.js";
import { CallbackReceiver } from "../support/callback-receiver.js";
import { driftEvent } from "../support/drift-events.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Periodic and on-demand drift checks of a real manent-server: records, events, callback, metric, heal, CLI. */
describe("drift checks", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let receiver: CallbackReceiver;
  let artifact: string;
  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url });
  const envconfig = (app: string, body: Record<string, unknown>) => ws.write(`envconfig/untenanted/${app}/${app}/test.yml`, body);

  const deploy = async (app: string, version = "1.0.0") => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "test", artifact, version), descriptor_file: `${app}.yml` });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    return id;
  };

  before(async () => {
    const { goSample } = await buildGoBinaries();
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    receiver = new CallbackReceiver();
    await receiver.start("/drift");
    artifact = await ws.write("dist/app.txt", "hello\n");
    const yml = manentYml(await pg.createDatabase());
    // The sample Go plugin implements no drift call: an older plugin, as far as drift goes.
    (yml.plugins as Record<string, unknown>).sample = { external: { command: goSample } };
    server = await startServer(await ws.write("manent.yml", yml), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await receiver?.stop();
    await pg?.stop();
  });

  it("reports within one interval a target changed by hand, naming it, calls back, and heals it with the recorded release", async () => {
    await envconfig("web", {
      plugin: "noop",
      targets: [{ host: "h1" }, { host: "h2" }],
      params: { state_dir: ws.path("state-web") },
      drift: { interval: "1s", heal: true },
      callbacks: [{ url: receiver.url, events: ["drifted"] }],
    });
    const id = await deploy("web");
    // The first periodic check: both in sync with the release deployed.
    const first = await driftEvent(server.api, "web", (ts) => ts.length === 2 && ts.every((t) => t.state === "in_sync"));
    assert.deepEqual(
      first.targets.map((t) => [t.target, t.deploy_id, t.expected_version, t.live_version]),
      [
        ["h1", id, "1.0.0", "1.0.0"],
        ["h2", id, "1.0.0", "1.0.0"],
      ],
    );

    // Someone puts another release on h2 by hand.
    await writeFile(ws.path("state-web", "h2.release"), "0.9.0");
    const called = await receiver.waitFor((p) => p.event === "drifted" && p.deploy.application === "web");
    assert.deepEqual(called.deploy, {
      id,
      kind: "deploy",
      tenant: "untenanted",
      application: "web",
      artifact: "web",
      environment: "test",
      version: "1.0.0",
      plugin: "noop",
      status: "succeeded",
      error: null,
    });
    const drifted = called.drift!.targets as TargetDriftRecord[];
    assert.deepEqual(
      drifted.map((t) => [t.target, t.state, t.changes]),
      [["h2", "drifted", [{ object: "release", field: "version", expected: "1.0.0", live: "0.9.0" }]]],
    );

    const found = await driftEvent(server.api, "web", (ts) => ts.some((t) => t.target === "h2" && t.state === "drifted"), first.id);
    // The heal: a deploy of the recorded release, by manent, after which the check finds h2 in sync.
    await driftEvent(server.api, "web", (ts) => ts.some((t) => t.target === "h2" && t.state === "in_sync"), found.id);
    assert.equal(await readFile(ws.path("state-web", "h2.release"), "utf8"), "1.0.0");
    const { deploys } = await server.api.list({ application: "web" });
    const heal = deploys.find((d) => d.submitted_by === "manent drift heal");
    assert.ok(heal, JSON.stringify(deploys));
    assert.deepEqual([heal.kind, heal.version, heal.status], ["deploy", "1.0.0", "succeeded"]);
  });

  it("manent diff checks on demand (exit 1 on drift), manent status shows it, the metric counts it; nothing heals when heal is off", async () => {
    await envconfig("api", { plugin: "noop", targets: [{ host: "a1" }], params: { state_dir: ws.path("state-api") } });
    const id = await deploy("api");
    await ws.write("api.yml", descriptor("api", "test", artifact));
    const clean = await cli("diff", "-f", "api.yml", "-o", "text");
    assert.equal(clean.code, 0, clean.stderr);
    assert.match(clean.stdout, /^a1: in sync \(runs 1\.0\.0\)$/m);

    await writeFile(ws.path("state-api", "a1.release"), "0.9.0");
    const diff = await cli("diff", "-f", "api.yml", "-o", "text");
    assert.equal(diff.code, 1, diff.stderr);
    assert.match(
      diff.stdout,
      new RegExp(
        `^api in test: compared with deploy ${id} \\(version 1\\.0\\.0\\)\na1: drifted \\(runs 0\\.9\\.0, deployed 1\\.0\\.0\\)\n  release version: 1\\.0\\.0 → 0\\.9\\.0\n` +
          `envconfig: a new deploy runs the release's settings \\(file \\S+/api/api/test\\.yml sha256 [0-9a-f]{12}\\)\n$`,
      ),
    );
    const status = await cli("status", id, "-o", "text");
    assert.equal(status.code, 0, status.stderr);
    assert.match(
      status.stdout,
      /drift, checked .*:\n {2}a1: drifted \(runs 0\.9\.0, deployed 1\.0\.0\)\n {4}release version: 1\.0\.0 → 0\.9\.0\n$/,
    );

    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /^manent_drifted_targets\{tenant="untenanted",application="api",environment="test"\} 1$/m);
    const { deploys } = await server.api.list({ application: "api" });
    assert.equal(deploys.length, 1, "no heal without drift.heal");

    // The envconfig changed since: diff tells what a new deploy would change, setting by setting.
    await envconfig("api", {
      plugin: "noop",
      targets: [{ host: "a1" }, { host: "a2" }],
      params: { state_dir: ws.path("state-api") },
      parallel: 2,
    });
    const changed = await cli("diff", "-f", "api.yml", "-o", "text");
    assert.equal(changed.code, 1, changed.stderr);
    assert.match(
      changed.stdout,
      /\nenvconfig: a new deploy changes 2 settings \(file \S+ sha256 [0-9a-f]{12} → file \S+ sha256 [0-9a-f]{12}\)\n {2}parallel: 1 → 2\n {2}targets\.a2\.host: \(absent\) → a2\n$/,
    );
    const report = await server.api.checkDrift({ descriptor: descriptor("api", "test", artifact), descriptor_file: "api.yml" });
    assert.notEqual(report.envconfig?.deployed?.sha256, report.envconfig?.current?.sha256);
    assert.deepEqual(report.envconfig?.changes?.[0], { field: "parallel", deployed: "1", current: "2" });
  });

  it("an older plugin without the drift call is shown as drift unknown, not as an error", async () => {
    await ws.write("keys/deploy-key", "the-deploy-key");
    await envconfig("legacy", {
      plugin: "sample",
      targets: [{ host: "l1" }],
      params: { base: ws.path("legacy") },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
    });
    await deploy("legacy");
    await ws.write("legacy.yml", descriptor("legacy", "test", artifact));
    const r = await cli("diff", "-f", "legacy.yml", "-o", "text");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^l1: drift unknown: plugin sample does not report drift \(it does not declare the drift capability\)$/m);
    const { targets } = await server.api.drift({ application: "legacy" });
    assert.deepEqual(
      targets.map((t) => [t.target, t.state]),
      [["l1", "unknown"]],
    );
  });
});
