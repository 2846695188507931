import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { EventFilter, PgEventHub } from "../../src/storage/pg-event-hub.js";
import { EventHubDatabase } from "../support/event-hub.js";

/**
 * The hub's memory of recent events, from which resuming streams get their backlog: what it gives
 * after an id is exactly what the database holds after it (for the reader's filter), and together
 * with a subscription taken in the same tick nothing is missed or given twice, even while events are
 * written; an id older than what it keeps is left to the database. (With a subscriber that wants
 * every event, as a stream is: otherwise the hub keeps none.)
 */
describe("event hub: recent events for resuming streams", () => {
  const db = new EventHubDatabase();
  const { append, reached } = db;
  let hub: PgEventHub;
  const ids = (events: DeployEvent[]) => events.map((e) => e.id);

  before(async () => {
    ({ hub } = await db.start(5));
    // The hub keeps recent events while it reads them all, i.e. while a subscriber wants them all
    // (as an open stream does); narrow reads are event-hub-narrow.test.ts's.
    hub.subscribe({}, () => undefined);
  });
  after(() => db.stop());

  it("gives from memory what the database holds after a kept id, per filter, and leaves older ids to the database", async () => {
    const start = hub.position;
    const a = await append("team-a", 4);
    const b = await append("team-b", 4);
    await reached(b.at(-1)!);
    const all = [...a, ...b];
    // 5 kept of 8: the events after the third are all in memory, those after the second are not.
    for (const filter of [{}, { tenant: "team-a" }, { tenant: "team-b" }, { tenant: "*" }] satisfies EventFilter[]) {
      const fromMemory = hub.recentAfter(all[2]!, filter);
      assert.ok(fromMemory, "an id the hub still keeps");
      assert.deepEqual(ids(fromMemory), ids(await hub.read(all[2]!, filter)));
      assert.deepEqual(fromMemory, await hub.read(all[2]!, filter));
    }
    assert.equal(hub.recentAfter(all[1]!, {}), undefined, "older than what it keeps: read the database");
    assert.equal(hub.recentAfter(start, {}), undefined);
    assert.deepEqual(hub.recentAfter(hub.position, {}), []);
    assert.deepEqual(hub.recentAfter(hub.position + 1000, {}), []);
  });

  it("with a subscription taken in the same tick, gives every later event once and in order while events are written", async () => {
    const writes = append("team-a", 30);
    const readers: { from: number; backlog: number[]; live: number[]; stop: () => void }[] = [];
    // Readers joining at several points during the writes, each resuming two events behind the hub.
    while (readers.length < 8) {
      await new Promise((r) => setTimeout(r, 5));
      const from = Math.max(0, hub.position - 2);
      const live: number[] = [];
      const stop = hub.subscribe({}, (e) => live.push(e.id)); // as stream() does: subscribe, then the backlog
      const backlog = hub.recentAfter(from, {});
      assert.ok(backlog, "two events behind is kept");
      readers.push({ from, backlog: ids(backlog), live, stop });
    }
    const written = await writes;
    await reached(written.at(-1)!);
    for (const { from, backlog, live, stop } of readers) {
      stop();
      // What a stream sends: the backlog, then the live events after the last one sent.
      const sent: number[] = [];
      for (const id of [...backlog, ...live]) if (id > (sent.at(-1) ?? from)) sent.push(id);
      assert.deepEqual(sent, ids(await hub.read(from, {}, 1000)), `a reader resuming after ${from}`);
    }
  });
});
