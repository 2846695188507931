import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type pg from "pg";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import { EventStreams } from "../../src/server/event-streams.js";
import type { EventFilter, PgEventHub } from "../../src/storage/pg-event-hub.js";
import { EventHubDatabase, quiet, Received } from "../support/event-hub.js";

/** The hub's read statement, as it reaches the pool. */
const readStatement = "manent.read_events_matching(";

/**
 * The hub reads only what its subscribers want (issue 31): with subscribers that name their types
 * or their deploy, its read statement returns only those events (seen from the rows the database
 * sent back), and keeps none in memory (a resuming stream reads the database); with one that wants
 * everything it reads everything again. A subscriber wanting more than the read in flight asked
 * for (a stream opening during a narrow read) still gets every event after the hub's position at
 * its subscription, in order: the page is read again before anyone gets any of it.
 */
describe("event hub: narrow reads", { timeout: 120_000 }, () => {
  const db = new EventHubDatabase();
  let pool: pg.Pool;
  let hub: PgEventHub;
  /** Every row the hub's read statements returned (null: the row carrying only the horizon). */
  let readRows: { id: number | null; type: string | null; deploy_id: string | null }[] = [];
  /** When set, the next read statement waits for it before it is sent (and `held` resolves). */
  let gate: { open: Promise<void>; held: () => void } | undefined;

  before(async () => {
    ({ pool, hub } = await db.start(1000));
    // Watches (and, for the race below, holds back) the hub's reads on the real pool: the rows the
    // database returned are the database's side of what was read.
    const query = pool.query.bind(pool) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    (pool as unknown as { query: typeof query }).query = async (text: string, values?: unknown[]) => {
      if (typeof text !== "string" || !text.includes(readStatement)) return query(text, values);
      // Its rows count for the test during which it was sent (its need was taken then): a read of
      // the test before can end during the next one.
      const rowsOfItsTest = readRows;
      const g = gate;
      if (g) {
        gate = undefined;
        g.held();
        await g.open;
      }
      const r = await query(text, values);
      for (const row of r.rows as { id: string | null; type: string | null; deploy_id: string | null }[])
        rowsOfItsTest.push({ id: row.id === null ? null : Number(row.id), type: row.type, deploy_id: row.deploy_id });
      return r;
    };
  });
  after(() => db.stop());
  beforeEach(() => {
    readRows = [];
  });

  /** Appends one event per [type, deploy] in its own transaction; their ids. */
  const write = async (events: [type: string, deploy: string | null][]): Promise<number[]> => {
    const ids: number[] = [];
    for (const [type, deploy] of events) {
      const r = await pool.query<{ id: string }>("select manent.append_event('t', $1, $2, '{}'::jsonb)::text as id", [deploy, type]);
      ids.push(Number(r.rows[0]!.id));
    }
    return ids;
  };
  /** A subscription collecting what it is given, with a wait for an id. */
  const collect = (filter: EventFilter) => {
    const got: DeployEvent[] = [];
    const waiters: { id: number; resolve: () => void }[] = [];
    const stop = hub.subscribe(filter, (e) => {
      got.push(e);
      for (const w of waiters.splice(0))
        if (e.id >= w.id) w.resolve();
        else waiters.push(w);
    });
    const until = (id: number) => new Promise<void>((resolve) => (got.some((e) => e.id >= id) ? resolve() : waiters.push({ id, resolve })));
    return { got, stop, until, ids: () => got.map((e) => e.id) };
  };
  const mixed = (n: number, deploys: string[]): [string, string | null][] =>
    Array.from({ length: n }, (_, i) => [["test.status", "test.step", "test.target"][i % 3]!, deploys[i % deploys.length]!]);

  it("reads only the types and deploys its subscribers name, and keeps none of them in memory", async () => {
    const start = hub.position;
    const statuses = collect({ types: ["test.status"] });
    const oneDeploy = collect({ deployId: "d2", types: ["test.step"] });
    const written = await write(mixed(30, ["d1", "d2", "d3"]));
    const expected = async (filter: EventFilter) => (await hub.read(start, filter, 1000)).map((e) => e.id);
    const wantStatus = await expected({ types: ["test.status"] });
    const wantStep = await expected({ deployId: "d2", types: ["test.step"] });
    await statuses.until(wantStatus.at(-1)!);
    await oneDeploy.until(wantStep.at(-1)!);
    statuses.stop();
    oneDeploy.stop();
    assert.deepEqual(statuses.ids(), wantStatus);
    assert.deepEqual(oneDeploy.ids(), wantStep);
    // What the database sent: those events, nothing else (10 statuses and d2's steps among 30).
    const read = readRows.filter((r) => r.id !== null);
    assert.ok(read.length > 0);
    for (const r of read)
      assert.ok(r.type === "test.status" || (r.type === "test.step" && r.deploy_id === "d2"), `read ${JSON.stringify(r)}`);
    assert.deepEqual(
      [...new Set(read.map((r) => r.id!))].sort((a, b) => a - b),
      [...new Set([...wantStatus, ...wantStep])].sort((a, b) => a - b),
    );
    assert.ok(read.length < written.length);
    // Nothing kept: a stream resuming before the hub's position reads the database; one starting there needs nothing.
    assert.equal(hub.recentAfter(start, {}), undefined);
    assert.equal(hub.recentAfter(written[10]!, { types: ["test.status"] }), undefined);
    assert.deepEqual(hub.recentAfter(hub.position, {}), []);
  });

  it("reads nothing but the horizon while nobody is subscribed, and everything again once someone wants it all", async () => {
    const quietIds = await write(mixed(6, ["d1"]));
    // A subscriber of one type waits for the last event, so the reads of the first ones are over.
    const marker = collect({ types: ["test.marker"] });
    const [mark] = await write([["test.marker", null]]);
    await marker.until(mark!);
    marker.stop();
    assert.ok(hub.position >= quietIds.at(-1)!);
    assert.deepEqual(
      readRows.filter((r) => r.id !== null).map((r) => r.id),
      [mark],
      "only what a subscriber of the time wanted",
    );
    readRows = [];
    const from = hub.position;
    const all = collect({});
    const ids = await write(mixed(9, ["d1", "d2"]));
    await all.until(ids.at(-1)!);
    assert.deepEqual(all.ids(), ids);
    assert.deepEqual(
      readRows.filter((r) => r.id !== null).map((r) => r.id),
      ids,
    );
    // Read whole, kept whole: a resume from before them is answered from memory, as the database would.
    assert.deepEqual(
      hub.recentAfter(from, {})?.map((e) => e.id),
      ids,
    );
    assert.deepEqual(
      hub.recentAfter(ids[3]!, { deployId: "d2" })?.map((e) => e.id),
      (await hub.read(ids[3]!, { deployId: "d2" })).map((e) => e.id),
    );
    all.stop();
  });

  it("keeps manent.read_events, which older servers' hubs call during a rolling upgrade: every event, as the hub's read of everything", async () => {
    const from = hub.position;
    const ids = await write(mixed(7, ["d1", "d2"]));
    const old = await pool.query("select * from manent.read_events($1, 500)", [from]);
    const all = await pool.query(`select * from ${readStatement}$1, 500, true, '{}', '{}', '{}', '{}')`, [from]);
    assert.deepEqual(
      old.rows.map((r: { id: string }) => Number(r.id)),
      ids,
    );
    assert.deepEqual(old.rows, all.rows);
    // The hub past these events before the next test subscribes.
    const marker = collect({ types: ["test.marker"] });
    const [mark] = await write([["test.marker", null]]);
    await marker.until(mark!);
    marker.stop();
  });

  it("reads by type, not by deploy, for a crowd of deploys, and still gives each subscriber its own", async () => {
    const deploys = Array.from({ length: 201 }, (_, i) => `crowd-${i}`);
    const subs = deploys.map((d) => collect({ deployId: d, types: ["test.step"] }));
    const start = hub.position;
    const ids = await write([
      ["test.step", "crowd-0"],
      ["test.status", "crowd-0"],
      ["test.step", "other"],
      ["test.step", "crowd-200"],
    ]);
    await subs[200]!.until(ids[3]!);
    await subs[0]!.until(ids[0]!);
    for (const s of subs) s.stop();
    assert.deepEqual(subs[0]!.ids(), [ids[0]]);
    assert.deepEqual(subs[200]!.ids(), [ids[3]]);
    assert.ok(subs.slice(1, 200).every((s) => s.got.length === 0));
    // The read asked for the type: another deploy's step came too, no status did.
    assert.deepEqual(
      readRows.filter((r) => r.id !== null && r.id > start).map((r) => r.id),
      [ids[0], ids[2], ids[3]],
    );
  });

  it("gives a stream opening during a narrow read every event after its start, in order, none missed", async () => {
    const streams = new EventStreams(hub, quiet);
    const drift = collect({ types: ["test.status"] }); // what the server's drift scheduler is: one type, in the background
    const start = hub.position;
    // The next read asks for statuses only: hold it before it reaches the database.
    let held!: () => void;
    const isHeld = new Promise<void>((resolve) => (held = resolve));
    let open!: () => void;
    gate = { open: new Promise<void>((resolve) => (open = resolve)), held };
    const before = await write(mixed(4, ["d1"]));
    await isHeld;
    // Streams open while that read waits: one live from the hub's position (no Last-Event-ID: no
    // database read), one resuming from before (its backlog from the database), one wide subscriber.
    const live = new Received();
    const resumed = new Received();
    const liveFrom = hub.position;
    assert.equal(liveFrom, start, "the held read has not moved the hub");
    streams.open(live.sink, {}, liveFrom);
    streams.open(resumed.sink, {}, 0);
    const wide = collect({});
    // More events commit before the held read runs: it will see them all, and ask for statuses only.
    const later = await write(mixed(8, ["d1", "d2"]));
    open();
    // One more event after the held read: whatever it delivered, this one comes to all of them (so a
    // gap fails the comparison below rather than a wait).
    const last = (await write([["test.end", null]]))[0]!;
    later.push(last);
    assert.equal(hub.recentAfter(0, {}), undefined, "the resumed stream reads the database");
    await live.until(() => live.ids().includes(last));
    await resumed.until(() => resumed.ids().includes(last));
    await wide.until(last);
    const inDb = (await hub.read(start, {}, 1000)).map((e) => e.id);
    assert.deepEqual(inDb, [...before, ...later]);
    assert.deepEqual(live.ids(), inDb, "the live stream: every event after the hub's position at its start");
    assert.deepEqual(
      resumed.ids(),
      (await hub.read(0, {}, 10_000)).map((e) => e.id),
      "the resumed stream",
    );
    assert.deepEqual(wide.ids(), inDb, "the wide subscriber");
    assert.deepEqual(
      drift.ids(),
      (await hub.read(start, { types: ["test.status"] })).map((e) => e.id),
      "the narrow subscriber: its events once each",
    );
    // The held read returned statuses only, and was read again for the newcomers before anyone got any of it.
    const firstRead = readRows.filter((r) => r.id !== null && r.id <= last);
    assert.ok(
      firstRead.some((r) => r.type !== "test.status"),
      "read again with everything",
    );
    wide.stop();
    drift.stop();
  });
});
