import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { PgDeployStore } from "../../src/storage/pg-deploy-store.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const shutdownTimeoutMs = 30_000;

/**
 * SIGTERM while a deploy step runs: the step finishes and is recorded, the server exits 0 within
 * shutdown_timeout, and a deploy still queued when it stopped runs after the restart.
 */
describe("graceful shutdown", () => {
  let postgres: TestPostgres;
  let ws: Workspace;
  let config: string;
  let databaseUrl: string;
  let artifact: string;
  let server: ServerProcess | undefined;

  const journal = () => readJournal(ws.path("journal"));
  /** Reads a deploy straight from the database, while no server runs. */
  const stored = async (id: string): Promise<DeployRecord> => {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    try {
      const d = await new PgDeployStore(pool).getDeploy(id);
      assert.ok(d, `deploy ${id} is recorded`);
      return d;
    } finally {
      await pool.end();
    }
  };

  before(async () => {
    postgres = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "bye\n");
    databaseUrl = await postgres.createDatabase();
    config = await ws.write("manent.yml", manentYml(databaseUrl, { shutdown_timeout: `${shutdownTimeoutMs}ms` }));
  });
  after(async () => {
    await server?.kill();
    await postgres?.stop();
  });

  it("finishes the running step, exits 0, and runs the queued deploy after a restart", async () => {
    await ws.write("envconfig/untenanted/calm/calm/prod.yml", {
      plugin: "noop",
      targets: [{ host: "calm-1" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay: "1s" },
    });
    server = await startServer(config, { cwd: ws.dir });
    const running = await server.api.submit({ descriptor: descriptor("calm", "prod", artifact, "1.0.0"), descriptor_file: "calm.yml" });
    const queued = await server.api.submit({ descriptor: descriptor("calm", "prod", artifact, "2.0.0"), descriptor_file: "calm.yml" });
    assert.equal(queued.queued_behind, running.id);

    // The plugin's deploy call has begun once the step is recorded as running (no event to await over the API).
    let d = await server.api.deploy(running.id);
    while (d.steps.find((s) => s.name === "deploy")?.status !== "running") {
      assert.ok(!["succeeded", "failed", "cancelled", "rolled_back"].includes(d.status), `deploy ended before SIGTERM: ${d.status}`);
      await new Promise((r) => setTimeout(r, 20));
      d = await server.api.deploy(running.id);
    }
    const signalledAt = Date.now();
    server.child.kill("SIGTERM");
    const exit = await server.exited;
    const tookMs = Date.now() - signalledAt;
    assert.deepEqual(exit, { code: 0, signal: null }, server.logs().slice(-3000));
    assert.ok(tookMs < shutdownTimeoutMs, `shutdown took ${tookMs}ms, over shutdown_timeout`);
    assert.match(server.logs(), /shutting down: waiting for running steps/);
    assert.match(server.logs(), /manent-server stopped/);

    const done = await stored(running.id);
    const step = done.steps.find((s) => s.name === "deploy");
    assert.equal(step?.status, "succeeded", JSON.stringify(done.steps));
    assert.equal(step?.attempts, 1);
    assert.equal(done.status, "succeeded");
    assert.equal(await readFile(ws.path("state", "calm-1.release"), "utf8"), "1.0.0");
    const waiting = await stored(queued.id);
    assert.ok(["queued", "running"].includes(waiting.status), `the queued deploy did not wait for the restart: ${waiting.status}`);
    assert.equal((await journal()).filter((j) => j.deployment === queued.id).length, 0);

    server = await startServer(config, { cwd: ws.dir });
    const resumed = await server.api.deploy(queued.id, 120);
    assert.equal(resumed.status, "succeeded", JSON.stringify(resumed.error));
    assert.equal(await readFile(ws.path("state", "calm-1.release"), "utf8"), "2.0.0");
    const calls = await journal();
    assert.equal(
      calls.filter((j) => j.deployment === running.id && j.call === "deploy").length,
      1,
      "the finished deploy did not run again",
    );
    assert.equal(calls.filter((j) => j.deployment === queued.id && j.call === "deploy").length, 1);
    await server.stop();
    assert.equal((await server.exited).code, 0);
    server = undefined;
  });
});
