import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type pg from "pg";
import type { DeployKind, NewDeploy, RunStart } from "../../src/core/engine/deploy-store.js";
import { databasePool } from "../../src/storage/database-pool.js";
import { PgDeployStore } from "../../src/storage/pg-deploy-store.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "../support/postgres.js";

/**
 * DBOS's partitioned queue can start two deploys of one key when two servers dequeue at once
 * (each claim reads the queue as it was before the other's committed). The store's start is the
 * second line: of two deploys of a key whose workflows both run, one is marked running and the
 * other waits for it. Real DBOS workflows (held open on a promise) on a real Postgres.
 */
describe("deploy store: one running deploy per key, whatever the queue let through", () => {
  let server: TestPostgres;
  let pool: pg.Pool;
  let store: PgDeployStore;
  const release = new Map<string, () => void>();
  let held: (id: string) => Promise<string>;

  before(async () => {
    server = await TestPostgres.start();
    const url = await server.createDatabase({ empty: true });
    // The server's pool: a step's held end goes with the next statement as one pipelined transaction.
    pool = databasePool({ connectionString: url, max: 6 });
    pool.on("error", () => undefined);
    await migrate(pool);
    store = new PgDeployStore(pool);
    held = DBOS.registerWorkflow(
      async (id: string) => {
        await new Promise<void>((resolve) => release.set(id, resolve));
        return id;
      },
      { name: "test.held" },
    );
    DBOS.setConfig({ name: "manent-test", systemDatabaseUrl: url, logLevel: "error" });
    await DBOS.launch();
  });
  after(async () => {
    for (const resolve of release.values()) resolve();
    await DBOS.shutdown();
    await pool?.end();
    await server?.stop();
  });

  const key = (application: string) => ({ tenant: "team-a", application, artifact: application, environment: "prod" });
  const record = (application: string, kind: DeployKind = "deploy"): NewDeploy => ({
    id: randomUUID(),
    kind,
    ...key(application),
    version: "1.0.0",
    request: {},
  });
  /** A workflow of the deploy's id, running (DBOS status PENDING) until it is released. */
  const running = async (d: NewDeploy) => {
    const handle = await DBOS.startWorkflow(held, { workflowID: d.id })(d.id);
    return async () => {
      while (!release.has(d.id)) await new Promise((r) => setImmediate(r));
      release.get(d.id)!();
      await handle.getResult();
    };
  };

  /** What a start found, without its time in the queue (its own test below). */
  const outcome = (s: RunStart) => (s.behind === undefined ? { status: s.status } : s);

  it("marks one of two deploys of a key started at once running and has the other wait for it", async () => {
    const [a, b] = [record("shop"), record("shop")];
    const [endA, endB] = [await running(a), await running(b)];
    const submitted = Date.now();
    await Promise.all([store.createDeploy(a), store.createDeploy(b)]);
    const starts = (await Promise.all([store.startRun(a.id, a), store.startRun(b.id, b)])).map(outcome);
    const first = starts.findIndex((s) => !("behind" in s));
    assert.ok(first >= 0, JSON.stringify(starts));
    const [winner, waiter] = first === 0 ? [a, b] : [b, a];
    assert.deepEqual(starts[first], { status: "running" });
    assert.deepEqual(starts[1 - first], { behind: winner.id });
    assert.equal((await store.getDeploy(waiter.id))?.status, "queued", "the waiting deploy stays queued");
    // Asked again (a replay after a crash), the running one goes on.
    assert.deepEqual(outcome(await store.startRun(winner.id, winner)), { status: "running" });

    await store.setStatus(winner.id, "succeeded");
    const waited = await store.startRun(waiter.id, waiter);
    assert.deepEqual(outcome(waited), { status: "running" });
    // Its time in the queue (manent_deploy_queue_wait_seconds): from its record's creation to now.
    const queuedMs = waited.behind === undefined ? waited.queuedMs : undefined;
    assert.ok(queuedMs !== undefined && queuedMs >= 0 && queuedMs <= Date.now() - submitted + 1000, `queued ${queuedMs} ms`);
    await endA();
    await endB();
  });

  it("does not wait for a deploy recorded running whose workflow has ended, nor for a dry run", async () => {
    const stale = record("cart");
    const end = await running(stale);
    assert.deepEqual(outcome(await store.startRun(stale.id, stale)), { status: "running" });
    await end(); // the workflow ended without writing the record's outcome (reconciled at the next start)
    const dry = record("cart", "dry_run");
    const endDry = await running(dry);
    assert.deepEqual(outcome(await store.startRun(dry.id, dry)), { status: "running" }, "a dry run holds no key");
    const next = record("cart");
    const endNext = await running(next);
    assert.deepEqual(outcome(await store.startRun(next.id, next)), { status: "running" });
    const dryToo = record("cart", "dry_run");
    const endDryToo = await running(dryToo);
    assert.deepEqual(outcome(await store.startRun(dryToo.id, dryToo)), { status: "running" }, "nor waits for one");
    for (const e of [endDry, endNext, endDryToo]) await e();
  });

  it("keeps other keys apart and a cancelled deploy's status as it is", async () => {
    const [a, b] = [record("api"), record("web")];
    const ends = [await running(a), await running(b)];
    assert.deepEqual(outcome(await store.startRun(a.id, a)), { status: "running" });
    assert.deepEqual(outcome(await store.startRun(b.id, b)), { status: "running" }, "another application is not held up");
    const c = record("api");
    ends.push(await running(c));
    await store.createDeploy(c);
    await store.requestCancel(c.id, { code: "canceled", message: "cancelled by a user before it started" });
    assert.deepEqual(outcome(await store.startRun(c.id, c)), { status: "cancelled" }, "it ends at once, not behind the running one");
    const d = record("api");
    ends.push(await running(d));
    assert.deepEqual(outcome(await store.startRun(d.id, d)), { behind: a.id });
    for (const e of ends) await e();
  });
});
