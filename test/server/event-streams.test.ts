import assert from "node:assert/strict";
import { after, before, describe, it, mock } from "node:test";
import pg from "pg";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import { EventStreams } from "../../src/server/event-streams.js";
import { PgEventHub, type EventFilter } from "../../src/storage/pg-event-hub.js";
import { EventHubDatabase, quiet, Received } from "../support/event-hub.js";

/**
 * The server's open SSE streams (src/server/event-streams.ts) on a real event hub: each stream gets
 * every event after its resume point that its filter lets through, once and in order, whether its
 * backlog comes from the hub's memory or from the database and while events are being written; a
 * stream of one tenant never gets another's; quiet streams get keep-alive comments from the one
 * shared timer, at most an interval after their last write; a closed stream is written no more,
 * and the hub's close ends every stream.
 */
describe("event streams", { timeout: 120_000 }, () => {
  const db = new EventHubDatabase();
  const { append, reached } = db;
  let pool: pg.Pool;
  let hub: PgEventHub;
  const dbIds = async (afterId: number, filter: EventFilter): Promise<number[]> =>
    (await hub.read(afterId, filter, 10_000)).map((e) => e.id);

  // Keeps 5 events: a stream resuming further back reads the database.
  before(async () => {
    ({ pool, hub } = await db.start(5));
  });
  after(() => db.stop());

  it("gives each stream every later event once and in order, from memory or the database, while events are written", async () => {
    const streams = new EventStreams(hub, quiet);
    const start = hub.position;
    const earlier = await append("team-a", 12);
    const writes = append("team-a", 40);
    const opened: { from: number; filter: EventFilter; got: Received; close: () => void }[] = [];
    let lastB = 0;
    // Streams resuming from every earlier event (the older ones beyond the hub's memory) and live ones, while the writes go on.
    for (const from of [start, ...earlier]) {
      const got = new Received();
      const filter = { tenant: "team-a" };
      opened.push({ from, filter, got, close: streams.open(got.sink, filter, from) });
      lastB = (await append("team-b", 1))[0]!;
    }
    for (let i = 0; i < 4; i++) {
      const got = new Received();
      const from = hub.position;
      opened.push({ from, filter: {}, got, close: streams.open(got.sink, {}, from) });
      lastB = (await append("team-b", 1))[0]!;
    }
    const last = (await writes).at(-1)!;
    for (const { from, filter, got, close } of opened) {
      // The last event the stream's filter lets through: team-a's last write, or for a live stream of
      // every tenant the last write of all (a live stream may open after team-a's writes ended).
      const final = filter.tenant === "team-a" ? last : Math.max(last, lastB);
      await got.until(() => got.ids().includes(final));
      close();
      const expected = (await dbIds(from, filter)).filter((id) => id <= got.ids().at(-1)!);
      assert.deepEqual(got.ids(), expected, `a stream resuming after ${from}`);
    }
    assert.equal(streams.size, 0);
  });

  it("sends an event delivered while its backlog is read from the database after that backlog", async () => {
    const from = hub.position;
    // More than the hub keeps, and delivered to it before the stream opens: the backlog is read from
    // the database (a stream opened before the hub heard of them would take them live, never reading).
    const backlog = await append("team-a", 8);
    await reached(backlog.at(-1)!);
    let during: number | undefined;
    // The hub, but each read of the database is followed by an append that the hub delivers before the read returns.
    const slowReads = Object.assign(Object.create(hub) as PgEventHub, {
      read: async (afterId: number, filter: EventFilter, limit: number) => {
        const page = await hub.read(afterId, filter, limit);
        if (during === undefined) {
          [during] = await append("team-a", 1);
          await reached(during!);
        }
        return page;
      },
    });
    const streams = new EventStreams(slowReads, quiet);
    const got = new Received();
    const close = streams.open(got.sink, { tenant: "team-a" }, from);
    await got.until(() => during !== undefined);
    // One more event, live: once it is received, everything before it has been sent.
    const [marker] = await append("team-a", 1);
    await got.until(() => got.ids().includes(marker!));
    close();
    assert.deepEqual(got.ids(), await dbIds(from, { tenant: "team-a" }));
  });

  it("never gives a stream of one tenant another tenant's events", async () => {
    const streams = new EventStreams(hub, quiet);
    const from = hub.position;
    const a = new Received();
    const b = new Received();
    const closeA = streams.open(a.sink, { tenant: "team-a" }, from);
    const closeB = streams.open(b.sink, { tenant: "team-b" }, from);
    const [idsA, idsB] = await Promise.all([append("team-a", 15), append("team-b", 15)]);
    await a.until(() => a.ids().includes(idsA.at(-1)!));
    await b.until(() => b.ids().includes(idsB.at(-1)!));
    assert.deepEqual(a.ids(), idsA);
    assert.deepEqual(b.ids(), idsB);
    assert.ok(a.events().every((e) => e.tenant === "team-a"));
    assert.ok(b.events().every((e) => e.tenant === "team-b"));
    closeA();
    closeB();
  });

  it("sends keep-alive comments to quiet streams from one timer, and nothing once a stream is closed", async () => {
    const streams = new EventStreams(hub, quiet, 20);
    const quietOne = new Received();
    const other = new Received();
    const closeQuiet = streams.open(quietOne.sink, { tenant: "nobody" }, hub.position);
    const closeOther = streams.open(other.sink, { tenant: "nobody" }, hub.position);
    await quietOne.until(() => quietOne.text.includes(": keep-alive\n\n"));
    await other.until(() => other.text.includes(": keep-alive\n\n"));
    assert.equal(quietOne.events().length, 0);
    assert.match(quietOne.text, /^(: keep-alive\n\n)+$/);
    closeQuiet();
    const seen = quietOne.text.length;
    // Another keep-alive to the stream still open: the closed one got nothing meanwhile.
    const now = other.text.length;
    await other.until(() => other.text.length > now);
    assert.equal(quietOne.text.length, seen);
    closeOther();
    assert.equal(streams.size, 0);
  });

  it("sends a stream's keep-alive at most an interval after its last write, and not before two thirds of it", async () => {
    // The interval's timer on a mocked clock; the hub's reads and deliveries run on the real one.
    mock.timers.enable({ apis: ["setInterval"] });
    try {
      const streams = new EventStreams(hub, quiet, 15_000);
      const got = new Received();
      const close = streams.open(got.sink, { tenant: "t-keep" }, hub.position);
      mock.timers.tick(5_000);
      // An event written just after a tick: the stream is quiet from here.
      const [id] = await append("t-keep", 1);
      await got.until(() => got.ids().includes(id!));
      const afterEvent = got.text.length;
      mock.timers.tick(10_000);
      assert.equal(got.text.length, afterEvent, "no keep-alive within 10 s of the event");
      mock.timers.tick(5_000);
      assert.equal(got.text.slice(afterEvent), ": keep-alive\n\n", "one keep-alive by 15 s after the event");
      close();
    } finally {
      mock.timers.reset();
    }
  });

  it("ends the stream of a client that does not read past the bound, and no other", async () => {
    const streams = new EventStreams(hub, quiet, 15_000, 4096);
    const stalled = new Received();
    const reading = new Received();
    const closeStalled = streams.open(stalled.sink, { tenant: "t-stall" }, hub.position);
    const closeReading = streams.open(reading.sink, { tenant: "t-stall" }, hub.position);
    const first = await append("t-stall", 1);
    await stalled.until(() => stalled.ids().length === 1);
    // The stalled client's socket now holds more than the bound: its next write ends the stream.
    stalled.pendingBytes = 4097;
    const more = await append("t-stall", 3);
    await stalled.until(() => stalled.ended);
    await reading.until(() => reading.ids().length === 4);
    assert.deepEqual(reading.ids(), [...first, ...more]);
    assert.equal(reading.ended, false);
    assert.equal(streams.size, 1);
    closeStalled();
    closeReading();
  });

  it("ends every open stream when the hub closes", async () => {
    const ownPool = new pg.Pool({ connectionString: pool.options.connectionString!, max: 2 });
    ownPool.on("error", () => undefined);
    const ownHub = await PgEventHub.start(ownPool, pool.options.connectionString!, quiet);
    const streams = new EventStreams(ownHub, quiet);
    const got = [new Received(), new Received()];
    for (const g of got) streams.open(g.sink, {}, ownHub.position);
    await ownHub.close();
    await ownPool.end();
    assert.ok(got.every((g) => g.ended));
    assert.equal(streams.size, 0);
  });
});
