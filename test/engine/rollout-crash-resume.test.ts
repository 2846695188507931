import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import pgDriver from "pg";
import type { ApiClient } from "../../src/cli/api-client.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { deployCalls } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const hosts = ["eu-1", "us-1"];
/** The plugin calls of the whole rollout, in order (reads left out). */
const rolloutCalls = (lastWeight: number) =>
  [1, 2].flatMap(() => [
    "prepare_slots",
    "deploy_candidate",
    "set_candidate_weight weight=50",
    `set_candidate_weight weight=${lastWeight}`,
    "promote_candidate",
    "retire_previous",
  ]);

/**
 * A server killed with SIGKILL at the transitions of a canary inside waves (a weight change, a pause,
 * an analysis, the approval between waves, a promote, a revert, a rollback) and started again: the
 * rollout resumes where it was, no completed transition runs again (only the one whose effect was done
 * but not checkpointed), and the traffic ends where it should.
 */
describe("rollout crash and resume", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;
  let web: Server;
  let healthUrl: string;
  let dbUrl: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "sweep\n");
    const db = await pg.createDatabase();
    dbUrl = db;
    // Without the scale capability, a weight is one plugin call.
    const plugins = { noop: { artifact_types: ["file"], without: ["scale"] } };
    config = await ws.write("manent.yml", manentYml(db, { plugins }));
    await ws.write("manent-other.yml", manentYml(undefined, { plugins, dbos: { database_url: db, executor_id: "other" } }));
    web = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"ok": true}'));
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    healthUrl = `http://127.0.0.1:${(web.address() as AddressInfo).port}/health`;
  });
  after(async () => {
    web?.close();
    await pg?.stop();
  });

  const envconfig = (app: string, params: Record<string, string> = {}) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: hosts.map((h) => ({ host: `${app}-${h}`, labels: { region: h.slice(0, 2) } })),
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...params },
      rollback: { enabled: true },
      retry_interval: "10ms",
      analysis: { checks: { health: { http: { url: healthUrl }, interval: "50ms", count: 1 } } },
      rollout: {
        waves: { by: ["region"], between: [{ approval: {} }] },
        canary: { steps: [{ set_weight: 50 }, { pause: "200ms" }, { analysis: { checks: ["health"] } }, { set_weight: 100 }] },
      },
    });
  const calls = (id: string) => deployCalls(ws.path("journal"), id);
  const state = (host: string, kind: string) => readFile(ws.path("state", `${host}.${kind}`), "utf8").catch(() => "");

  /** Approves the gate between the waves whenever the deploy waits at it, until the deploy ends or the server goes. */
  const approver = (api: ApiClient, id: string, alive: () => boolean) =>
    (async () => {
      while (alive()) {
        const d = await api.deploy(id).catch(() => undefined);
        if (!d || ["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) return;
        if (d.rollout?.waiting?.kind === "approval") await api.rolloutCommand(id, "approve").catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

  const sweep = async (app: string, killAt: string, params: Record<string, string> = {}, whileDown?: (id: string) => Promise<void>) => {
    await envconfig(app, params);
    // The release the rollout starts from.
    for (const h of hosts) await ws.write(`state/${app}-${h}.release`, "1.0.0");
    const doomed: ServerProcess = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: killAt } });
    let up = true;
    void doomed.exited.then(() => (up = false));
    const { id } = await doomed.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` });
    const approving = approver(doomed.api, id, () => up);
    const exit = await doomed.exited;
    await approving;
    assert.equal(exit.signal, "SIGKILL", `server was not killed at ${killAt}:\n${doomed.logs().slice(-3000)}`);
    if (whileDown) await whileDown(id);
    const server = await startServer(config, { cwd: ws.dir });
    try {
      // An approval sent while the server was down is the only one: none is sent after the restart.
      const resumed = whileDown ? Promise.resolve() : approver(server.api, id, () => true);
      const d = await server.api.deploy(id, 120);
      await resumed;
      return { d, calls: await calls(id) };
    } finally {
      await server.stop();
    }
  };

  /** The journal is the expected sequence, with at most the killed transition run twice in a row. */
  const assertOnce = (actual: string[], expected: string[], killAt: string) => {
    const deduped = actual.filter((c, i) => c !== actual[i - 1] || !c.startsWith(killedCall(killAt)));
    assert.deepEqual(deduped, expected, `after a kill at ${killAt}`);
    assert.ok(actual.length - expected.length <= (killAt.endsWith(":after") ? 1 : 0), `${killAt}: ran ${actual.join(" | ")}`);
  };
  const killedCall = (killAt: string): string => {
    const step = killAt.split(":").slice(0, -1).join(":");
    if (step.endsWith("set_weight") || step.endsWith("set_weight_0")) return "set_candidate_weight";
    return step.split(":").at(-1)!;
  };

  const points = [
    "wave-1:prepare_slots:after",
    "wave-1:deploy_candidate:after",
    "wave-1:canary-1:set_weight:after",
    "wave-1:canary-2:pause:after",
    "wave-1:canary-3:analysis:1:after",
    "wave-1:promote_candidate:after",
    "wave-1:retire_previous:checkpointed",
    "wave-2:canary-4:set_weight:checkpointed",
    "wave-2:promote_candidate:after",
  ];
  for (const [i, killAt] of points.entries()) {
    it(`completes the rollout after a kill at ${killAt}`, async () => {
      const { d, calls: journal } = await sweep(`sw${i}`, killAt);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      assertOnce(journal, rolloutCalls(100), killAt);
      for (const h of hosts) {
        assert.equal(await state(`sw${i}-${h}`, "release"), "2.0.0");
        assert.equal(await state(`sw${i}-${h}`, "candidate"), "");
      }
      for (const s of d.steps.filter((s) => /:(pause|approval)$/.test(s.name))) assert.equal(s.attempts, 1, `${s.name} started once`);
      assert.deepEqual(
        d.rollout!.waves.map((w) => w.status),
        ["succeeded", "succeeded"],
      );
    });
  }

  it("acts on an approval sent through another server while the deploy's server is down", async () => {
    const { d, calls: journal } = await sweep("swap", "wave-1:gate-1:approval:after", {}, async (id) => {
      const other = await startServer(ws.path("manent-other.yml"), { cwd: ws.dir });
      try {
        const approved = await other.api.rolloutCommand(id, "approve");
        assert.equal(approved.status, "running");
      } finally {
        await other.stop();
      }
    });
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assertOnce(journal, rolloutCalls(100), "wave-1:gate-1:approval:after");
    assert.equal(d.rollout!.commands.filter((c) => c.command === "approve").length, 1);
  });

  it("keeps the state it had reached while it resumes: an approval is taken at once, and no event shows an earlier state again", async () => {
    const app = "steady";
    const killAt = "wave-1:gate-1:approval:after";
    await envconfig(app);
    for (const h of hosts) await ws.write(`state/${app}-${h}.release`, "1.0.0");
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: killAt } });
    const { id } = await doomed.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` });
    const exit = await doomed.exited;
    assert.equal(exit.signal, "SIGKILL", `server was not killed at ${killAt}:\n${doomed.logs().slice(-3000)}`);
    const server = await startServer(config, { cwd: ws.dir });
    try {
      // Sent once, whenever the resumed workflow is replaying its transitions: the state it had reached stands meanwhile.
      await server.api.rolloutCommand(id, "approve");
      const d = await server.api.deploy(id, 120);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    } finally {
      await server.stop();
    }
    const db = new pgDriver.Client({ connectionString: dbUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ type: string; data: { current_wave?: number; waiting?: { step?: string } | null } }>(
        `select type, data from manent.events where deploy_id = $1 and type in ('wave.moved', 'gate.waiting') order by id`,
        [id],
      );
      const waits = rows.filter((e) => e.type === "gate.waiting" && e.data.waiting?.step === "wave-1:gate-1:approval");
      assert.equal(waits.length, 1, "the approval between the waves began once");
      const waves = rows.filter((e) => e.type === "wave.moved").map((e) => e.data.current_wave ?? 0);
      assert.deepEqual(
        waves,
        [...waves].sort((a, b) => a - b),
        `the current wave never goes back: ${waves.join(", ")}`,
      );
    } finally {
      await db.end();
    }
  });

  for (const [i, killAt] of ["wave-2:revert:set_weight_0:after", "wave-2:revert_candidate:after", "rollback:after"].entries()) {
    it(`finishes the revert and the rollback of wave 1 after a kill at ${killAt}`, async () => {
      const app = `swr${i}`;
      const { d, calls: journal } = await sweep(app, killAt, { fail_at_weight: "100", fail_hosts: `${app}-us-1` });
      assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
      assert.match(
        d.error!.message,
        /^wave 2 \(region=us\) failed: canary step 4 \(set_weight 100\) failed: .*; weight 0, candidate reverted; wave 1 rolled back$/,
      );
      const expected = [
        ...rolloutCalls(100).slice(0, 6),
        ...rolloutCalls(100).slice(0, 4),
        "set_candidate_weight weight=0",
        "revert_candidate",
        `rollback ${app}-eu-1=1.0.0`,
      ];
      assertOnce(journal, expected, killAt);
      for (const h of hosts) {
        assert.equal(await state(`${app}-${h}`, "release"), "1.0.0");
        assert.equal(await state(`${app}-${h}`, "candidate"), "");
      }
    });
  }
});
