import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * One resolution per deploy: the envconfig is read once, when the submission is validated, and the
 * workflow runs exactly that, wherever and whenever it runs. Two servers on one database whose
 * envconfig files differ (each its own working directory), an edit of the file while the deploy
 * waits in its queue, and the server running it SIGKILLed mid-deploy: the deploy still runs what
 * was submitted, and its record says which bytes those were.
 */
describe("the envconfig a deploy was submitted with is the one it runs", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  const servers: Record<string, ServerProcess> = {};
  const file = "envconfig/untenanted/pinned/pinned/prod.yml";
  const envconfig = (hosts: string[], extra: Record<string, unknown> = {}) => ({
    plugin: "noop",
    targets: hosts.map((host) => ({ host })),
    params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay: "400ms" },
    ...extra,
  });

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
  });
  after(async () => {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    await pgServer?.stop();
  });

  it("runs the submitted envconfig after an edit while queued, on either server of a fleet with other files, across a kill -9; the record, status and history name its path and sha256", async () => {
    const databaseUrl = await pgServer.createDatabase();
    const artifact = await ws.write("dist/app.txt", "pinned\n");
    // The first deploy holds the application's queue at an approval, so the second waits behind it.
    const held = { rollout: { canary: { steps: [{ set_weight: 50 }, { approval: {} }] } } };
    await ws.write(`alpha/${file}`, envconfig(["held-1"], held));
    for (const executor of ["alpha", "beta"]) {
      const config = await ws.write(
        `${executor}/manent.yml`,
        manentYml(undefined, {
          dbos: { database_url: databaseUrl, executor_id: executor, heartbeat_interval: "250ms", dead_after: "2s" },
          workdir: "./work",
          // The artifact is in the workspace, outside either server's working directory.
          artifacts: { allowed_paths: [ws.dir], allowed_urls: [], allowed_networks: ["127.0.0.1/32"] },
        }),
      );
      servers[executor] = await startServer(config, { cwd: ws.path(executor) });
    }
    const alpha = servers.alpha!;
    const first = await alpha.api.submit({ descriptor: descriptor("pinned", "prod", artifact, "1.0.0"), descriptor_file: "pinned.yml" });
    await deployReaching(alpha.api, first.id, (d) => d.rollout?.waiting?.kind === "approval", "the first deploy waiting", 30_000);

    // What alpha validates now, and what the second deploy must run.
    await ws.write(`alpha/${file}`, envconfig(["a-1", "a-2"]));
    const submittedText = await readFile(ws.path(`alpha/${file}`), "utf8");
    const second = await alpha.api.submit({ descriptor: descriptor("pinned", "prod", artifact, "2.0.0"), descriptor_file: "pinned.yml" });
    assert.equal(second.queued_behind, first.id);
    // Edited on alpha while it waits; beta's file was never the same.
    await ws.write(`alpha/${file}`, envconfig(["edited-1"]));
    await ws.write(`beta/${file}`, envconfig(["b-1"]));

    // Let it run, and SIGKILL whichever server runs it once its deploy call started: the peer takes it over.
    const db = new pg.Client(databaseUrl);
    await db.connect();
    try {
      assert.equal((await runCli(["approve", first.id], { cwd: ws.dir, server: alpha.url })).code, 0);
      while (!(await readJournal(ws.path("journal"))).some((j) => j.deployment === second.id && j.call === "deploy")) {
        await new Promise((r) => setTimeout(r, 25));
      }
      const executor = (
        await db.query<{ executor_id: string }>("select executor_id from dbos.workflow_status where workflow_uuid = $1", [second.id])
      ).rows[0]?.executor_id;
      assert.ok(executor === "alpha" || executor === "beta", `deploy ${second.id} runs on ${executor}`);
      await servers[executor]!.kill();
      delete servers[executor];
    } finally {
      await db.end();
    }
    const survivor = Object.values(servers)[0]!;
    const d: DeployRecord = await survivor.api.deploy(second.id, 120);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(d.targets.map((t) => t.host).sort(), ["a-1", "a-2"]);
    const hosts = new Set((await readJournal(ws.path("journal"))).filter((j) => j.deployment === second.id).flatMap((j) => j.hosts));
    assert.deepEqual([...hosts].sort(), ["a-1", "a-2"], "no call reached a target of another file");
    assert.deepEqual(d.envconfig, { provider: "file", path: `./${file}`, sha256: sha256(submittedText) });

    // Shown in history's wide table (and in status's view on a terminal).
    const history = await runCli(["history", "--application", "pinned", "-o", "wide"], { cwd: ws.dir, server: survivor.url });
    const [header, ...rows] = history.stdout
      .trimEnd()
      .split("\n")
      .map((l) => l.split("\t"));
    const row = rows.find((r) => r[1] === second.id)!;
    assert.equal(row[header!.indexOf("ENVCONFIG")], `file ./${file} sha256 ${sha256(submittedText).slice(0, 12)}`);
  });
});
