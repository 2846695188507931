import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type pg from "pg";
import type { NewDeploy } from "../../src/core/engine/deploy-store.js";
import { databasePool } from "../../src/storage/database-pool.js";
import { PgDeployStore } from "../../src/storage/pg-deploy-store.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "../support/postgres.js";

/**
 * The DBOS input of a deploy's workflow (its submission and record, 1.3 KB) is deleted by the start
 * of its key's next deploy once the workflow has ended SUCCESS or ERROR, and kept while DBOS may
 * still run it. Real DBOS workflows named as manent's (held open on a promise) on a real Postgres,
 * and the reads DBOS and manent make of an ended workflow, done without its input.
 */
describe("deploy store: the DBOS input of a key's ended deploy goes at its next deploy's start", () => {
  let server: TestPostgres;
  let pool: pg.Pool;
  let store: PgDeployStore;
  const finish = new Map<string, (how: "return" | "throw") => void>();
  let deployWorkflow: (id: string) => Promise<string>;
  let otherWorkflow: (id: string) => Promise<string>;

  before(async () => {
    server = await TestPostgres.start();
    const url = await server.createDatabase({ empty: true });
    // The server's pool: a step's held end goes with the next statement as one pipelined transaction.
    pool = databasePool({ connectionString: url, max: 6 });
    pool.on("error", () => undefined);
    await migrate(pool);
    store = new PgDeployStore(pool);
    const held = async (id: string) => {
      const how = await new Promise<"return" | "throw">((resolve) => finish.set(id, resolve));
      if (how === "throw") throw new Error(`deploy ${id} failed`);
      return `outcome of ${id}`;
    };
    // The name manent's deploys run under (engine.ts deployWorkflowName); the other is not a deploy.
    deployWorkflow = DBOS.registerWorkflow((id: string) => held(id), { name: "manent.deploy" });
    otherWorkflow = DBOS.registerWorkflow((id: string) => held(id), { name: "test.other" });
    DBOS.setConfig({ name: "manent-test", systemDatabaseUrl: url, logLevel: "error" });
    await DBOS.launch();
  });
  after(async () => {
    for (const resolve of finish.values()) resolve("return");
    await DBOS.shutdown();
    await pool?.end();
    await server?.stop();
  });

  const record = (application: string): NewDeploy => ({
    id: randomUUID(),
    kind: "deploy",
    tenant: "team-a",
    application,
    artifact: application,
    environment: "prod",
    version: "1.0.0",
    request: {},
  });
  /** A workflow of the deploy's id, running (DBOS status PENDING) until `end` returns or throws in it. */
  const running = async (d: NewDeploy, workflow = deployWorkflow) => {
    const handle = await DBOS.startWorkflow(workflow, { workflowID: d.id })(d.id);
    return async (how: "return" | "throw" = "return") => {
      while (!finish.has(d.id)) await new Promise((r) => setImmediate(r));
      finish.get(d.id)!(how);
      await handle.getResult().catch(() => undefined);
    };
  };
  /** A deploy started as its workflow starts it: key claimed, record running. */
  const started = async (d: NewDeploy, workflow = deployWorkflow) => {
    const end = await running(d, workflow);
    const s = await store.startRun(d.id, d);
    assert.ok(s.behind === undefined && s.status === "running", JSON.stringify(s));
    return end;
  };
  const hasInput = async (id: string) =>
    (await pool.query(`select 1 from dbos.workflow_input where workflow_uuid = $1`, [id])).rows.length === 1;
  const status = async (id: string) =>
    (await pool.query<{ status: string }>(`select status from dbos.workflow_status where workflow_uuid = $1`, [id])).rows[0]?.status;

  it("deletes it once the workflow ended SUCCESS or ERROR, in either start path; the key's newest keeps its own", async () => {
    const a = record("shop");
    const endA = await started(a);
    await store.setStatus(a.id, "succeeded");
    await endA("return");
    assert.equal(await status(a.id), "SUCCESS");
    assert.ok(await hasInput(a.id), "an ended deploy keeps its input until its key's next deploy starts");

    const b = record("shop");
    const endB = await started(b);
    assert.equal(await hasInput(a.id), false, "the next deploy's start deleted the ended one's input");
    assert.ok(await hasInput(b.id), "the running deploy keeps its own");
    await store.setStatus(b.id, "failed");
    await endB("throw");
    assert.equal(await status(b.id), "ERROR");

    // The start that reads the record first (a workflow that does not carry its record).
    const c = record("shop");
    await store.createDeploy(c);
    const endC = await running(c);
    const s = await store.startRun(c.id);
    assert.ok(s.behind === undefined && s.status === "running", JSON.stringify(s));
    assert.equal(await hasInput(b.id), false, "an ERROR workflow's input goes too");
    assert.ok(await hasInput(c.id));
    await store.setStatus(c.id, "succeeded");
    await endC("return");
  });

  it("keeps it while DBOS may run the workflow again, and for a workflow that is not a deploy", async () => {
    // The record ended but the workflow has not yet (DBOS marks it after the function returns).
    const a = record("cart");
    const endA = await started(a);
    await store.setStatus(a.id, "succeeded");
    const b = record("cart");
    const endB = await started(b);
    assert.equal(await status(a.id), "PENDING");
    assert.ok(await hasInput(a.id), "a workflow still running keeps its input");
    await endA("return");

    // Cancelled: DBOS can resume it, from its input.
    await store.setStatus(b.id, "cancelled");
    await DBOS.cancelWorkflow(b.id);
    assert.equal(await status(b.id), "CANCELLED");
    const c = record("cart");
    const endC = await started(c);
    assert.ok(await hasInput(b.id), "a cancelled workflow keeps its input");
    await endB("return");
    await store.setStatus(c.id, "succeeded");
    await endC("return");

    // A key held by a workflow of another name: not manent's deploy, not manent's to delete.
    const x = record("web");
    const endX = await started(x, otherWorkflow);
    await store.setStatus(x.id, "succeeded");
    await endX("return");
    assert.equal(await status(x.id), "SUCCESS");
    const y = record("web");
    const endY = await started(y);
    assert.ok(await hasInput(x.id), "another workflow's input is left alone");
    await store.setStatus(y.id, "succeeded");
    await endY("return");
  });

  it("leaves an ended workflow whose input is gone readable, listed, unrestarted and deletable by DBOS", async () => {
    const a = record("api");
    const endA = await started(a);
    await store.setStatus(a.id, "succeeded");
    await endA("return");
    const b = record("api");
    const endB = await started(b);
    assert.equal(await hasInput(a.id), false);

    // DBOS's reads: its status, its result, the listings (which join the input table with a left join).
    const s = await DBOS.getWorkflowStatus(a.id);
    assert.equal(s?.status, "SUCCESS");
    assert.equal(s?.input, undefined);
    assert.equal(await DBOS.retrieveWorkflow<string>(a.id).getResult(), `outcome of ${a.id}`);
    const listed = await DBOS.listWorkflows({ workflowIDs: [a.id, b.id] });
    assert.deepEqual(
      listed.map((w) => [w.workflowID, w.status]).sort(),
      [
        [a.id, "SUCCESS"],
        [b.id, "PENDING"],
      ].sort(),
    );
    assert.ok((await DBOS.listWorkflows({ workflowName: "manent.deploy", status: "SUCCESS" })).some((w) => w.workflowID === a.id));
    assert.ok(!(await DBOS.listQueuedWorkflows({})).some((w) => w.workflowID === a.id));
    // Started again under its id (a replay), DBOS answers with the recorded outcome and runs nothing.
    const again = await DBOS.startWorkflow(deployWorkflow, { workflowID: a.id })(a.id);
    assert.equal(await again.getResult(), `outcome of ${a.id}`);
    assert.equal(await status(a.id), "SUCCESS");
    assert.equal(await hasInput(a.id), false, "nor writes the input back");
    // The manent record is whole.
    assert.equal((await store.getDeploy(a.id))?.status, "succeeded");

    // What the retention sweep does (engine.deleteEndedWorkflows).
    await DBOS.deleteWorkflows([a.id]);
    assert.equal(await status(a.id), undefined);
    await store.setStatus(b.id, "succeeded");
    await endB("return");
  });
});
