import assert from "node:assert/strict";
import { mkdir, readFile, rm } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A deploy's DBOS input (dbos.workflow_input) goes when its key's next deploy starts, once its
 * workflow has ended: on a real server and Postgres, such a deploy stays whole through the API (the
 * deploy, the list, its events), a server restart leaves it alone, and `manent retry` of it and a
 * rollback to its version run with what it recorded.
 */
describe("a deploy whose workflow input was deleted", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let config: string;
  let db: pg.Client;
  let artifact: string;

  const envconfig = () =>
    ws.write("envconfig/untenanted/shop/shop/dev.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }, { host: "shop-2" }],
      params: { state_dir: ws.path("state") },
      max_retries: 0,
    });
  const deploy = async (version: string): Promise<DeployRecord> => {
    const { id } = await server.api.submit({ descriptor: descriptor("shop", "dev", artifact, version), descriptor_file: "shop.yml" });
    return server.api.deploy(id, 60);
  };
  const hasInput = async (id: string) =>
    (await db.query(`select 1 from dbos.workflow_input where workflow_uuid = $1`, [id])).rows.length === 1;
  const workflow = async (id: string) =>
    (
      await db.query<{ status: string; recovery_attempts: string; updated_at: string }>(
        `select status, recovery_attempts::text, updated_at::text from dbos.workflow_status where workflow_uuid = $1`,
        [id],
      )
    ).rows[0];

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    const databaseUrl = await pgServer.createDatabase();
    artifact = await ws.write("dist/app.txt", "inputs\n");
    config = await ws.write("manent.yml", manentYml(databaseUrl));
    await envconfig();
    server = await startServer(config, { cwd: ws.dir });
    db = new pg.Client(databaseUrl);
    await db.connect();
  });
  after(async () => {
    await db?.end();
    await server?.stop();
    await pgServer?.stop();
  });

  it("stays readable, is not recovered at a restart, and can be retried and rolled back to", async () => {
    const first = await deploy("1.0.0");
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));
    assert.ok(await hasInput(first.id), "the key's newest deploy keeps its input");
    // shop-2's release file is a directory: the noop plugin cannot write it, so 2.0.0 fails.
    await rm(ws.path("state", "shop-2.release"));
    await mkdir(ws.path("state", "shop-2.release"));
    const failed = await deploy("2.0.0");
    assert.ok(failed.status === "failed" || failed.status === "rolled_back", `${failed.status}`);
    assert.equal(await hasInput(first.id), false, "2.0.0's start deleted 1.0.0's input");
    await rm(ws.path("state", "shop-2.release"), { recursive: true });
    const third = await deploy("3.0.0");
    assert.equal(third.status, "succeeded", JSON.stringify(third.error));
    assert.equal(await hasInput(failed.id), false, "an ended deploy whose workflow ended its way too");
    assert.ok(await hasInput(third.id));
    const before = { first: await workflow(first.id), failed: await workflow(failed.id) };
    assert.equal(before.first?.status, "SUCCESS");

    // The API reads the deploy from manent's own record: whole.
    for (const [d, was] of [
      [first, "1.0.0"],
      [failed, "2.0.0"],
    ] as const) {
      const read = await server.api.deploy(d.id);
      assert.deepEqual(read, d, "the deploy reads as it did when it ended");
      assert.equal(read.version, was);
      assert.ok(read.steps.find((s) => s.name === "resolve")?.output, "its resolved settings");
    }
    const listed = (await server.api.list({ application: "shop" })).deploys.map((d) => d.id);
    for (const id of [first.id, failed.id, third.id]) assert.ok(listed.includes(id), `${id} listed`);
    const events: { type: string; data: Record<string, unknown> }[] = [];
    await server.api.streamEvents(
      `/api/v1/deploys/${failed.id}/events`,
      (e) => {
        events.push(e);
        return e.type === "deploy.status" && e.data.status === failed.status;
      },
      { after: 0 },
    );
    assert.equal(events[0]?.type, "deploy.created");
    assert.ok(events.some((e) => e.type === "step.started" && e.data.name === "resolve"));

    // A restart recovers pending workflows only: these are left as they were, and nothing asks for their inputs.
    await server.stop();
    server = await startServer(config, { cwd: ws.dir });
    assert.deepEqual(await workflow(first.id), before.first);
    assert.deepEqual(await workflow(failed.id), before.failed);
    assert.doesNotMatch(server.logs(), /Failed to find inputs|Could not execute workflow/);
    assert.equal((await server.api.deploy(failed.id)).status, failed.status);

    // A retry of the failed deploy runs with its recorded settings (two targets), from its record.
    await ws.write("envconfig/untenanted/shop/shop/dev.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }, { host: "shop-2" }, { host: "shop-3" }],
      params: { state_dir: ws.path("state") },
      max_retries: 0,
    });
    const cli = await runCli(["retry", failed.id, "-o", "text"], { cwd: ws.dir, server: server.url });
    assert.equal(cli.code, 0, cli.stdout + cli.stderr);
    const retryId = /\[([0-9a-f-]{36})\] retry of ([0-9a-f-]{36})/.exec(cli.stdout);
    assert.ok(retryId, cli.stdout);
    const retried = await server.api.deploy(retryId[1]!, 60);
    assert.equal(retried.status, "succeeded", JSON.stringify(retried.error));
    assert.equal(retried.retry_of, failed.id);
    assert.equal(retried.version, "2.0.0");
    assert.deepEqual(
      [...new Set(retried.targets.filter((t) => t.phase === "deploy").map((t) => t.host))].sort(),
      ["shop-1", "shop-2"],
      "the targets the failed deploy resolved",
    );
    assert.equal(await hasInput(third.id), false);
    await envconfig();

    // A rollback to the version of the first deploy, whose input went first.
    const back = await server.api.rollback({ descriptor: descriptor("shop", "dev", artifact), descriptor_file: "shop.yml", to: "1.0.0" });
    const rolledBack = await server.api.deploy(back.id, 60);
    assert.equal(rolledBack.status, "succeeded", JSON.stringify(rolledBack.error));
    assert.equal(rolledBack.version, "1.0.0");
    for (const host of ["shop-1", "shop-2"]) assert.equal(await readFile(ws.path("state", `${host}.release`), "utf8"), "1.0.0");
  });
});
