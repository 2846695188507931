import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A server of another manent version stopped with a deploy running and one queued behind it. DBOS
 * resumes a workflow only under the version that started it, so without care the running one would
 * stay pending forever, holding its application's place, and the queued one would never start. What
 * an older server leaves is made here by stamping the workflows with another version while the
 * server is down, exactly as DBOS's table holds them.
 */
describe("deploys left by another manent version", () => {
  let testPg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let databaseUrl: string;
  let artifact: string;

  before(async () => {
    testPg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    databaseUrl = await testPg.createDatabase();
    config = await ws.write("manent.yml", manentYml(databaseUrl));
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "noop",
      targets: Array.from({ length: 6 }, (_, i) => ({ host: `shop-${i}` })),
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), journal_targets: "true", delay: "400ms" },
    });
  });
  after(async () => testPg?.stop());

  it("the started one ends failed saying so, and the queued one runs under the new version", async () => {
    let server: ServerProcess = await startServer(config, { cwd: ws.dir });
    const running = await server.api.submit({ descriptor: descriptor("shop", "prod", artifact, "1.0.0"), descriptor_file: "shop.yml" });
    const queued = await server.api.submit({ descriptor: descriptor("shop", "prod", artifact, "2.0.0"), descriptor_file: "shop.yml" });
    try {
      // The first deploy has changed a target: it is under way when the server dies.
      const deadline = Date.now() + 60_000;
      while (!(await readJournal(ws.path("journal"))).some((j) => j.deployment === running.id && j.call === "deploy_target")) {
        if (Date.now() > deadline) throw new Error(`the deploy did not start: ${server.logs().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal((await server.api.deploy(queued.id)).status, "queued");
      await server.kill();

      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      try {
        const stamped = await db.query(
          "update dbos.workflow_status set application_version = '0.0.9-older' where workflow_uuid = any($1::text[]) returning status",
          [[running.id, queued.id]],
        );
        assert.deepEqual(stamped.rows.map((r: { status: string }) => r.status).sort(), ["ENQUEUED", "PENDING"]);
      } finally {
        await db.end();
      }

      server = await startServer(config, { cwd: ws.dir });
      const ended = async (id: string) => {
        const until = Date.now() + 90_000;
        let d = await server.api.deploy(id, 30);
        while (d.status === "queued" || d.status === "running") {
          if (Date.now() > until) throw new Error(`deploy ${id} is still ${d.status}: ${server.logs().slice(-2000)}`);
          d = await server.api.deploy(id, 30);
        }
        return d;
      };
      const first = await ended(running.id);
      assert.equal(first.status, "failed");
      assert.match(first.error?.message ?? "", /upgraded from 0\.0\.9-older to .* while this deploy ran.*partly deployed/);

      const second = await ended(queued.id);
      assert.equal(second.status, "succeeded", JSON.stringify(second.error));
      const calls = (await readJournal(ws.path("journal"))).filter((j) => j.deployment === running.id && j.call === "deploy");
      assert.equal(calls.length, 1, "the started deploy was not replayed by the new version");
    } finally {
      await server.stop();
    }
  });
});
