import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { PgEventHub } from "../../src/storage/pg-event-hub.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "../support/postgres.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Event ids commit out of order (appends take no lock in turn): a transaction holding a lower id
 * may commit after one holding a higher id. Readers must never skip it: neither a direct read nor
 * a hub (one per server, here two on one database) may give an id while a lower one can still
 * commit. Each case holds a transaction open on a connection of its own while another commits.
 */
describe("event log: ids that commit out of order", () => {
  let server: TestPostgres;
  let url: string;
  let pools: pg.Pool[];
  let hubs: PgEventHub[];
  const clients: pg.Client[] = [];

  const connect = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: url });
    c.on("error", () => undefined);
    await c.connect();
    clients.push(c);
    return c;
  };
  const append = async (db: pg.Client | pg.Pool, type: string): Promise<number> =>
    Number((await db.query<{ id: string }>("select manent.append_event('team-a', null, $1, '{}'::jsonb)::text as id", [type])).rows[0]!.id);
  /** Every event each hub delivers, in order. */
  const record = (hub: PgEventHub): { ids: number[]; stop: () => void } => {
    const ids: number[] = [];
    return { ids, stop: hub.subscribe({}, (e) => ids.push(e.id)) };
  };
  /** Resolves once `hub` has delivered up to `id` (a deadline only as a safety net). */
  const reached = (hub: PgEventHub, id: number) =>
    new Promise<void>((resolve, reject) => {
      if (hub.position >= id) return resolve();
      const timer = setTimeout(() => reject(new Error(`hub still at ${hub.position}, not at ${id}, after 60 s`)), 60_000);
      const stop = hub.subscribe({}, (e) => {
        if (e.id >= id) {
          clearTimeout(timer);
          stop();
          resolve();
        }
      });
    });
  const readIds = async (hub: PgEventHub, afterId: number) => (await hub.read(afterId, {}, 1000)).map((e) => e.id);
  /** Resolves once a read of a hub on `pool` that starts after this call has ended (its statement answered). */
  const nextHubRead = (pool: pg.Pool): Promise<void> =>
    new Promise((resolve) => {
      const target = pool as unknown as { query: (...args: unknown[]) => Promise<unknown> };
      const query = target.query.bind(pool);
      target.query = (...args: unknown[]) => {
        const result = query(...args);
        const text = typeof args[0] === "string" ? args[0] : "";
        if (text.includes("manent.read_events_matching")) {
          target.query = query;
          result.then(
            () => resolve(),
            () => resolve(),
          );
        }
        return result;
      };
    });

  before(async () => {
    server = await TestPostgres.start();
    url = await server.createDatabase({ empty: true });
    pools = [new pg.Pool({ connectionString: url, max: 4 }), new pg.Pool({ connectionString: url, max: 4 })];
    for (const p of pools) p.on("error", () => undefined);
    await migrate(pools[0]!);
    hubs = [await PgEventHub.start(pools[0]!, url, quiet), await PgEventHub.start(pools[1]!, url, quiet)];
  });
  after(async () => {
    for (const h of hubs ?? []) await h.close();
    for (const c of clients) await c.end().catch(() => undefined);
    for (const p of pools ?? []) await p.end();
    await server?.stop();
  });

  it("gives a higher id only after a lower one still open commits, then both in id order", async () => {
    const start = Math.max(...hubs.map((h) => h.position));
    const seen = hubs.map(record);
    const slow = await connect();
    await slow.query("begin");
    const low = await append(slow, "test.low");
    const high = await append(pools[0]!, "test.high"); // committed while `low` is not
    assert.ok(high > low);
    // Read after `high` committed, on each server: nothing while `low` may still commit.
    for (const hub of hubs) assert.deepEqual(await readIds(hub, start), [], "a reader must not pass the open lower id");
    await slow.query("commit");
    for (const hub of hubs) await reached(hub, high);
    for (const { ids, stop } of seen) {
      stop();
      assert.deepEqual(ids, [low, high], "each hub delivers the lower id, before the higher one");
    }
    for (const hub of hubs) assert.deepEqual(await readIds(hub, start), [low, high]);
  });

  it("moves on past the ids of a transaction that rolls back (which notifies nobody)", async () => {
    const start = Math.max(...hubs.map((h) => h.position));
    const seen = hubs.map(record);
    const doomed = await connect();
    await doomed.query("begin");
    const lost = await append(doomed, "test.lost");
    const kept = await append(pools[1]!, "test.kept");
    assert.deepEqual(await readIds(hubs[0]!, start), []);
    await doomed.query("rollback");
    for (const hub of hubs) await reached(hub, kept);
    for (const { ids, stop } of seen) {
      stop();
      assert.deepEqual(ids, [kept]);
    }
    assert.ok(lost < kept);
    assert.deepEqual(await readIds(hubs[1]!, start), [kept]);
  });

  it("keeps a transaction's claim after a savepoint rolled back its first append", async () => {
    const start = Math.max(...hubs.map((h) => h.position));
    const seen = hubs.map(record);
    const slow = await connect();
    await slow.query("begin");
    await slow.query("savepoint s");
    await append(slow, "test.undone");
    await slow.query("rollback to savepoint s");
    const low = await append(slow, "test.low");
    const high = await append(pools[0]!, "test.high");
    assert.ok(high > low);
    for (const hub of hubs) assert.deepEqual(await readIds(hub, start), []);
    await slow.query("commit");
    for (const hub of hubs) await reached(hub, high);
    for (const { ids, stop } of seen) {
      stop();
      assert.deepEqual(ids, [low, high]);
    }
  });

  it("a claim below what the hubs have read holds them back without moving them back", async () => {
    // The state a claim is in when it read the sequence's position, then a horizon was read, then
    // it took its lock: its claim is below what the hubs have already delivered.
    const seen = hubs.map(record);
    const first = await append(pools[0]!, "test.first");
    for (const hub of hubs) await reached(hub, first);
    const late = await connect();
    await late.query("begin");
    // The claim's key as events-schema.ts makes it ("me" << 48, plus the position).
    await late.query(
      "select pg_advisory_xact_lock_shared((28005::bigint << 48) + $1::bigint), set_config('manent.event_claim', $1::text, true)",
      [first - 1],
    );
    const low = await append(late, "test.low");
    const read = pools.map(nextHubRead);
    const high = await append(pools[1]!, "test.high"); // its NOTIFY makes each hub read while the claim holds it back
    assert.ok(first < low && low < high);
    await Promise.all(read);
    for (const hub of hubs) {
      assert.deepEqual(await readIds(hub, first), [], "nothing is given while the late claim is held");
      assert.ok(hub.position >= first, `a hub moved back to ${hub.position}, below ${first} it delivered`);
    }
    await late.query("commit");
    for (const hub of hubs) await reached(hub, high);
    for (const { ids, stop } of seen) {
      stop();
      assert.deepEqual(ids, [first, low, high], "each id once, in order");
    }
  });

  it("many writers committing in any order: each hub delivers every committed id once, in order", async () => {
    const start = Math.max(...hubs.map((h) => h.position));
    const seen = hubs.map(record);
    // 6 transactions each appending 3 events, interleaved, then committed in reverse order of their first id.
    const writers = await Promise.all(Array.from({ length: 6 }, () => connect()));
    for (const w of writers) await w.query("begin");
    const written: number[][] = writers.map(() => []);
    for (let round = 0; round < 3; round++) for (const [i, w] of writers.entries()) written[i]!.push(await append(w, `test.w${i}`));
    for (const w of [...writers].reverse()) await w.query("commit");
    const all = written.flat().sort((a, b) => a - b);
    for (const hub of hubs) await reached(hub, all.at(-1)!);
    for (const { ids, stop } of seen) {
      stop();
      assert.deepEqual(ids, all);
    }
    for (const hub of hubs) assert.deepEqual(await readIds(hub, start), all);
  });

  it("a commit finding another one notifying leaves the NOTIFY to it; a hub with subscribers reads anyway if that one never comes", async () => {
    // The try-lock events_notify takes (events-schema.ts), held here as a notifying commit holds it.
    const notifyGate = 0x6d6e5f6e7466;
    const listener = await connect();
    let notifications = 0;
    listener.on("notification", () => notifications++);
    await listener.query("listen manent_events");
    const safe = await PgEventHub.start(pools[0]!, url, quiet, { safetyReadMs: 200 });
    try {
      const seen = record(safe);
      const notifying = await connect();
      await notifying.query("select pg_advisory_lock($1)", [notifyGate]);
      const skipped = await append(pools[1]!, "test.skipped");
      // A notification committed before this round trip has reached the listener by its end.
      await listener.query("select 1");
      assert.equal(notifications, 0, "a commit that finds the NOTIFY taken sends none");
      // As if the notifying commit had failed: only the hub's safety read finds the event.
      await reached(safe, skipped);
      assert.deepEqual(seen.ids, [skipped]);
      await notifying.query("select pg_advisory_unlock($1)", [notifyGate]);
      const next = await append(pools[1]!, "test.notified");
      for (const hub of [...hubs, safe]) await reached(hub, next);
      await listener.query("select 1");
      assert.equal(notifications, 1, "the next commit notifies");
      seen.stop();
      assert.deepEqual(seen.ids, [skipped, next]);
    } finally {
      await safe.close();
    }
  });
});
