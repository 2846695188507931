import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DBOS, Error as DBOSErrors } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import { noMetrics } from "../../src/core/engine/engine-metrics.js";
import { runStep } from "../../src/core/engine/step-runner.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { databasePool } from "../../src/storage/database-pool.js";
import { PgDeployStore } from "../../src/storage/pg-deploy-store.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "../support/postgres.js";

/**
 * A deploy step's record is its checkpoint (engine/step-runner.ts): a step run again returns its
 * recorded outcome without running, and only the execution that owns the workflow (DBOS's
 * ownership token) records a step, as DBOS's own step checkpoints. Real DBOS workflows on a real
 * Postgres; the other owner is written where DBOS's recovery on another server writes it.
 */
describe("deploy step checkpoints", () => {
  let server: TestPostgres;
  let pool: pg.Pool;
  let store: PgDeployStore;
  const deps = () => ({ store, metrics: noMetrics });
  let workflow: (id: string, scenario: string) => Promise<unknown>;
  const gates = new Map<string, { reached: () => void; go: Promise<void>; thrown: (e: unknown) => void }>();
  let bodies = 0;

  before(async () => {
    server = await TestPostgres.start();
    const url = await server.createDatabase({ empty: true });
    // The server's pool (pipelined: a step's held end goes with the next statement in one round trip).
    pool = databasePool({ connectionString: url, max: 4 });
    pool.on("error", () => undefined);
    await migrate(pool);
    store = new PgDeployStore(pool);
    workflow = DBOS.registerWorkflow(
      async (id: string, scenario: string) => {
        const once = { maxRetries: 0, intervalMs: 0 };
        if (scenario === "twice") {
          const first = await runStep(deps(), id, 1, "one", once, async () => ({ n: ++bodies }));
          // The same step again (what a replay of the workflow meets): its checkpoint, not a second run.
          const again = await runStep(deps(), id, 1, "one", once, async () => ({ n: ++bodies }));
          let failures = 0;
          const failed = await runStep(deps(), id, 2, "two", { maxRetries: 2, intervalMs: 1 }, async () => {
            failures += 1;
            throw new ManentError(Code.Unavailable, "down");
          }).catch((e: unknown) => ManentError.from(e));
          const replayed = await runStep(deps(), id, 2, "two", once, async () => ({ ran: true })).then(
            () => "ran again",
            (e: unknown) => ManentError.from(e).message,
          );
          return { first, again, failed: failed.message, failures, replayed };
        }
        const gate = gates.get(id)!;
        try {
          await runStep(deps(), id, 1, "held", once, async () => {
            gate.reached();
            await gate.go;
            return { done: true };
          });
          // A step's end waits for the deploy's next statement (held-writes.ts): here the next step's start.
          return await runStep(deps(), id, 2, "next", once, async () => ({ ran: true }));
        } catch (err) {
          gate.thrown(err);
          throw err;
        }
      },
      { name: "test.steps" },
    );
    DBOS.setConfig({ name: "manent-test", systemDatabaseUrl: url, logLevel: "error" });
    await DBOS.launch();
  });
  after(async () => {
    await DBOS.shutdown();
    await pool?.end();
    await server?.stop();
  });

  const newDeploy = async () => {
    const id = randomUUID();
    await store.createDeploy({
      id,
      kind: "deploy",
      tenant: "t",
      application: "a",
      artifact: "a",
      environment: "e",
      version: "1",
      request: {},
    });
    return id;
  };

  it("returns a recorded outcome without running the step again, a failure as it was thrown", async () => {
    const id = await newDeploy();
    const out = await (await DBOS.startWorkflow(workflow, { workflowID: id })(id, "twice")).getResult();
    assert.deepEqual(out, {
      first: { n: 1 },
      again: { n: 1 },
      failed: "down (after 3 attempts)",
      failures: 3,
      replayed: "down (after 3 attempts)",
    });
    assert.equal(bodies, 1);
    const d = await store.getDeploy(id);
    assert.deepEqual(
      d!.steps.map((s) => `${s.name} ${s.status} ${s.attempts}`),
      ["one succeeded 1", "two failed 3"],
    );
  });

  it("stops an execution that no longer owns the workflow, recording nothing", async () => {
    const id = await newDeploy();
    let reached!: () => void;
    const atBody = new Promise<void>((r) => (reached = r));
    let go!: () => void;
    let thrown!: (e: unknown) => void;
    const stopped = new Promise<unknown>((r) => (thrown = r));
    gates.set(id, { reached, go: new Promise<void>((r) => (go = r)), thrown });
    await DBOS.startWorkflow(workflow, { workflowID: id })(id, "held");
    await atBody;
    const owner = await pool.query<{ owner_xid: string }>(`select owner_xid from dbos.workflow_status where workflow_uuid = $1`, [id]);
    // What DBOS's recovery of the workflow on another server writes: its own token.
    await pool.query(`update dbos.workflow_status set owner_xid = $2 where workflow_uuid = $1`, [id, randomUUID()]);
    go();
    assert.ok((await stopped) instanceof DBOSErrors.DBOSWorkflowConflictError);
    const steps = (await store.getDeploy(id))!.steps;
    assert.equal(
      steps.find((s) => s.name === "held")!.status,
      "running",
      "the step's end was not recorded by the execution that lost the workflow",
    );
    assert.equal(
      steps.find((s) => s.name === "next"),
      undefined,
      "nor the next step's start, held with it",
    );
    // The execution that owns it now finds no checkpoint: it runs the step; the old token starts nothing.
    const stale = { workflowId: id, token: owner.rows[0]!.owner_xid };
    assert.deepEqual(await store.beginStep(id, 1, "held", { unlessCancelled: false, owner: stale }), { run: false, reason: "not_owner" });
    assert.equal(await store.endStep(id, "held", 1, { status: "succeeded", output: {}, final: "ended" }, stale), false);
    assert.equal((await store.getDeploy(id))!.steps.find((s) => s.name === "held")!.attempts, 1);
    // The run that lost the workflow waits for its recorded outcome: ended here, as the test's other server never runs.
    await DBOS.cancelWorkflow(id);
  });
});
