import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { deployCalls } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Pauses, approvals and the operator commands (approve, promote, promote --full, abort, cancel) through the real CLI and server. */
describe("rollout gates and commands", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const journal = (id: string) => deployCalls(ws.path("journal"), id);
  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url, env: { MANENT_OUTPUT: "text" } });
  const start = async (app: string, rollout: Record<string, unknown>, targets = [{ host: `${app}-1` }]) => {
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets,
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout,
    });
    return (await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` })).id;
  };
  /** Polls the API until the deploy satisfies `ok` (the server long-polls only for the end of a deploy). */
  const until = (id: string, ok: (d: DeployRecord) => boolean, what: string) => deployReaching(server.api, id, ok, what, 30_000);
  const waitingFor = (kind: string) => (d: DeployRecord) => d.rollout?.waiting?.kind === kind;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "gates\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("waits for an approval, says how to give it, and goes on when approved", async () => {
    const id = await start("appr", { canary: { steps: [{ set_weight: 10 }, { approval: {} }, { set_weight: 100 }] } });
    const waiting = await until(id, waitingFor("approval"), "waiting for approval");
    assert.equal(waiting.rollout!.canary!.weight, 10);
    const status = await cli("status", id);
    assert.match(status.stdout, new RegExp(`waiting for approval: manent approve ${id}`));
    assert.match(status.stdout, /canary: step 2\/3 \(approval\), weight 10%, stepping/);
    // A promote is no approval's business only when nothing waits; approve is refused while a pause waits (see below).
    const approved = await cli("approve", id);
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, new RegExp(`${id} approve sent by anonymous during canary-2:approval`));
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(
      d.rollout!.commands.map((c) => `${c.command} ${c.by} ${c.during}`),
      ["approve anonymous canary-2:approval"],
    );
    assert.ok(!Number.isNaN(Date.parse(d.rollout!.commands[0]!.at)));
    const gate = d.steps.find((s) => s.name === "canary-2:approval")!;
    assert.equal(gate.status, "succeeded");
    assert.match(gate.output!.result, /approve by anonymous/);
    assert.equal(await readFile(ws.path("state", "appr-1.release"), "utf8"), "2.0.0");
    const late = await cli("approve", id);
    assert.notEqual(late.code, 0);
    assert.match(late.stderr, /has already ended \(succeeded\)/);
  });

  it("aborts and reverts when nobody approves in time", async () => {
    const id = await start("tout", { canary: { steps: [{ set_weight: 10 }, { approval: { timeout: "1s" } }, { set_weight: 100 }] } });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "deadline_exceeded");
    assert.match(d.error!.message, /^canary step 2 \(approval \(timeout 1s\)\): nobody approved within 1s; weight 0, candidate reverted$/);
    assert.deepEqual((await journal(id)).slice(-3), ["set_candidate_weight weight=0", "scale_candidate weight=0", "revert_candidate"]);
    assert.equal(d.steps.find((s) => s.name === "canary-2:approval")!.status, "failed");
  });

  it("skips every remaining step with promote --full", async () => {
    const id = await start("full", {
      canary: { steps: [{ set_weight: 10 }, { pause: {} }, { set_weight: 50 }, { approval: {} }, { set_weight: 100 }] },
    });
    const paused = await until(id, waitingFor("pause"), "paused");
    assert.match(paused.rollout!.waiting!.hint, new RegExp(`paused until promoted: manent promote ${id}`));
    const refused = await cli("approve", id);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /is not waiting for an approval \(paused until promoted/);
    const promoted = await cli("promote", id, "--full");
    assert.equal(promoted.code, 0, promoted.stderr);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = await journal(id);
    assert.ok(!calls.some((c) => c.endsWith("weight=50") || c.endsWith("weight=100")), calls.join(" | "));
    assert.deepEqual(calls.slice(-2), ["promote_candidate", "retire_previous"]);
    assert.deepEqual(
      d.rollout!.commands.map((c) => `${c.command} ${c.full}`),
      ["promote true"],
    );
  });

  it("aborts during a pause: weight 0, candidate reverted, the abort recorded with who and when", async () => {
    const id = await start("abrt", { canary: { steps: [{ set_weight: 20 }, { pause: "1h" }, { set_weight: 100 }] } });
    const paused = await until(id, waitingFor("pause"), "paused");
    assert.match(paused.rollout!.waiting!.hint, /^paused until \S+: manent promote \S+ to go on now$/);
    const aborted = await cli("abort", id);
    assert.equal(aborted.code, 0, aborted.stderr);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.match(d.error!.message, /^aborted by anonymous during canary step 2 \(pause 1h\); weight 0, candidate reverted$/);
    assert.deepEqual((await journal(id)).slice(-3), ["set_candidate_weight weight=0", "scale_candidate weight=0", "revert_candidate"]);
    assert.deepEqual(
      d.rollout!.commands.map((c) => `${c.command} ${c.by} ${c.during}`),
      ["abort anonymous canary-2:pause"],
    );
    assert.equal(d.rollout!.waiting, null);
    // The candidate's target is listed reverted after the deploy that put it there, not left `deployed`.
    assert.deepEqual(
      d.targets.filter((t) => t.host === "abrt-1").map((t) => `${t.phase} ${t.status}`),
      ["deploy deployed", "revert_candidate rolled_back"],
    );
  });

  it("reverts a canary cancelled during a pause, and says so", async () => {
    const id = await start("cncl", { canary: { steps: [{ set_weight: 30 }, { pause: {} }] } });
    await until(id, waitingFor("pause"), "paused");
    const cancelled = await cli("cancel", id);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "canceled");
    assert.match(d.error!.message, /^cancelled by anonymous during canary step 2 \(pause until promote\); weight 0, candidate reverted$/);
    assert.deepEqual((await journal(id)).slice(-1), ["revert_candidate"]);
  });

  it("waits between waves: a timed pause, then an approval, each wave deployed after its gates", async () => {
    const targets = [
      { host: "gw-1", labels: { region: "eu" } },
      { host: "gw-2", labels: { region: "us" } },
    ];
    const id = await start("gwav", { waves: { by: ["region"], between: [{ pause: "300ms" }, { approval: {} }] } }, targets);
    const waiting = await until(id, waitingFor("approval"), "approval between waves");
    assert.deepEqual(
      waiting.rollout!.waves.map((w) => w.status),
      ["succeeded", "pending"],
    );
    assert.equal(waiting.rollout!.waiting!.step, "wave-1:gate-2:approval");
    const status = await cli("status", id);
    assert.match(status.stdout, /wave 1\/2 region=eu: succeeded \(1 targets\)/);
    assert.equal((await server.api.rolloutCommand(id, "approve")).rollout!.commands.length, 1);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(
      d.steps.filter((s) => s.name.startsWith("wave-")).map((s) => `${s.name}:${s.status}`),
      ["wave-1:deploy:succeeded", "wave-1:gate-1:pause:succeeded", "wave-1:gate-2:approval:succeeded", "wave-2:deploy:succeeded"],
    );
  });
});
