import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { readJournal } from "../support/journal.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Two servers on one database; the one running a deploy is SIGKILLed and never comes back: the
 * other notices its heartbeats stopped, takes over its pending workflows (DBOS recovery for that
 * executor) and completes the deploy, once.
 */
describe("a fleet that heals", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let servers: Record<string, ServerProcess> = {};

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
  });
  after(async () => {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    await pgServer?.stop();
  });

  it("a server killed for good mid-deploy: its peer completes that deploy, once", async () => {
    const databaseUrl = await pgServer.createDatabase();
    const artifact = await ws.write("dist/app.txt", "fleet\n");
    const hosts = ["heal-1", "heal-2", "heal-3", "heal-4"];
    await ws.write("envconfig/untenanted/heal/heal/prod.yml", {
      plugin: "noop",
      targets: hosts.map((host) => ({ host })),
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay: "700ms" },
    });
    for (const executor of ["alpha", "beta"]) {
      const config = await ws.write(
        `${executor}.yml`,
        manentYml(undefined, {
          dbos: { database_url: databaseUrl, executor_id: executor, heartbeat_interval: "250ms", dead_after: "2s" },
          workdir: `./work-${executor}`,
        }),
      );
      servers[executor] = await startServer(config, { cwd: ws.dir });
    }
    const { id } = await servers.alpha!.api.submit({
      descriptor: descriptor("heal", "prod", artifact, "5.0.0"),
      descriptor_file: "heal.yml",
    });

    // Whichever server dequeued it is the one to kill, once its deploy call has started.
    const db = new pg.Client(databaseUrl);
    await db.connect();
    let executor: string | undefined;
    try {
      while (!(await readJournal(ws.path("journal"))).some((j) => j.deployment === id && j.call === "deploy")) {
        await new Promise((r) => setTimeout(r, 25));
      }
      executor = (await db.query<{ executor_id: string }>("select executor_id from dbos.workflow_status where workflow_uuid = $1", [id]))
        .rows[0]?.executor_id;
    } finally {
      await db.end();
    }
    assert.ok(executor === "alpha" || executor === "beta", `deploy ${id} runs on ${executor}`);
    const survivor = executor === "alpha" ? "beta" : "alpha";
    await servers[executor]!.kill();
    delete servers[executor];

    const d = await servers[survivor]!.api.deploy(id, 120);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
    // The call cut by the kill, then one complete call by the survivor: one deploy_end.
    assert.equal(calls.filter((j) => j.call === "deploy").length, 2, JSON.stringify(calls));
    assert.equal(calls.filter((j) => j.call === "deploy_end").length, 1, JSON.stringify(calls));
    const takeovers = servers[survivor]!.logs()
      .split("\n")
      .filter((l) => l.includes("took over the pending deploys of a dead server"));
    assert.equal(takeovers.length, 1, takeovers.join("\n"));
    assert.match(takeovers[0]!, new RegExp(`"dead_executor_id":"${executor}"`));
    assert.match(takeovers[0]!, /"workflows":1/);
    // A later heartbeat round finds nothing more to take over.
    for (const host of hosts) assert.ok(d.targets.some((t) => t.host === host && t.status === "deployed"));
  });
});
