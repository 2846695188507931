import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RecentCounts } from "../../../src/plugins/noop/recent-counts.js";

describe("RecentCounts (the noop plugin's per-deploy call counts)", () => {
  it("counts per key", () => {
    const c = new RecentCounts(10);
    assert.equal(c.increment("d1"), 1);
    assert.equal(c.increment("d1"), 2);
    assert.equal(c.increment("d2"), 1);
    assert.equal(c.get("d1"), 2);
    assert.equal(c.get("d3"), 0);
  });

  it("keeps at most `limit` keys however many are counted, forgetting the least recently counted first", () => {
    const c = new RecentCounts(3);
    for (let i = 0; i < 10_000; i++) c.increment(`d${i}`);
    assert.equal(c.size, 3);
    assert.deepEqual(
      ["d9997", "d9998", "d9999", "d0"].map((k) => c.get(k)),
      [1, 1, 1, 0],
    );
  });

  it("counting a key again makes it the most recent one, so a deploy still being retried keeps its count", () => {
    const c = new RecentCounts(2);
    c.increment("retried");
    c.increment("other");
    c.increment("retried");
    c.increment("newer"); // evicts "other", the least recently counted
    assert.equal(c.get("retried"), 2);
    assert.equal(c.get("other"), 0);
    assert.equal(c.increment("retried"), 3);
  });

  it("refuses a limit that is not a positive integer", () => {
    assert.throws(() => new RecentCounts(0), RangeError);
    assert.throws(() => new RecentCounts(1.5), RangeError);
  });
});
