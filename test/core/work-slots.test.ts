import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DurableWaits } from "../../src/core/engine/durable-waits.js";
import { WorkSlots } from "../../src/core/engine/work-slots.js";

/** Which of `ids` hold a slot now (their acquire has resolved). */
async function granted(pending: Map<string, Promise<void>>): Promise<string[]> {
  const done: string[] = [];
  for (const [id, p] of pending)
    if (await Promise.race([p.then(() => true), new Promise<boolean>((r) => setImmediate(() => r(false)))])) done.push(id);
  return done.sort();
}

describe("work slots", () => {
  it("gives a free slot to the waiting tenant holding the fewest, then to the one served longest ago", async () => {
    const slots = new WorkSlots(2);
    const pending = new Map<string, Promise<void>>();
    for (let i = 1; i <= 5; i++) pending.set(`a${i}`, slots.acquire(`a${i}`, "team-a"));
    assert.deepEqual(await granted(pending), ["a1", "a2"]);
    pending.set("b1", slots.acquire("b1", "team-b"));
    assert.deepEqual(slots.usage(), { held: 2, waiting: 4 });
    slots.release("a1");
    assert.deepEqual(
      await granted(pending),
      ["a1", "a2", "b1"],
      "team-b's deploy takes the first slot that frees, before team-a's backlog",
    );
    slots.release("a2");
    assert.deepEqual(await granted(pending), ["a1", "a2", "a3", "b1"]);
  });

  it("keeps a tenant within its share of the slots, however long its deploys run", async () => {
    const slots = new WorkSlots(5, 0.8);
    const pending = new Map<string, Promise<void>>();
    for (let i = 1; i <= 6; i++) pending.set(`a${i}`, slots.acquire(`a${i}`, "team-a"));
    assert.deepEqual(await granted(pending), ["a1", "a2", "a3", "a4"], "4 of 5 slots (0.8): one stays free");
    pending.set("b1", slots.acquire("b1", "team-b"));
    assert.deepEqual(await granted(pending), ["a1", "a2", "a3", "a4", "b1"], "team-b starts at once, team-a's deploys still running");
    assert.deepEqual(slots.usage(), { held: 5, waiting: 2 });
    // A share below one slot is one slot.
    const tiny = new WorkSlots(2, 0.1);
    await tiny.acquire("x", "t");
    const second = new Map([["y", tiny.acquire("y", "t")]]);
    assert.deepEqual(await granted(second), []);
  });

  it("takes a deploy's slot back while it waits durably, and gives it one again after", async () => {
    const slots = new WorkSlots(1);
    const waits = new DurableWaits(slots);
    await slots.acquire("canary", "team-a");
    let release!: () => void;
    const paused = waits.during("canary", () => new Promise<void>((r) => (release = r)));
    const other = slots.acquire("other", "team-b");
    await other;
    assert.deepEqual(slots.usage(), { held: 1, waiting: 0 }, "the paused canary's slot went to another deploy");
    release();
    let resumed = false;
    void paused.then(() => (resumed = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(resumed, false, "the canary waits for a slot before it goes on");
    slots.release("other");
    await paused;
    assert.deepEqual(slots.usage(), { held: 1, waiting: 0 });
  });

  it("gives back a slot once across nested waits", async () => {
    const slots = new WorkSlots(1);
    const waits = new DurableWaits(slots);
    await slots.acquire("d", "t");
    await waits.during("d", () => waits.during("d", async () => assert.deepEqual(slots.usage(), { held: 0, waiting: 0 })));
    assert.deepEqual(slots.usage(), { held: 1, waiting: 0 }, "holds its slot again, once");
  });
});
