import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SignInRefusals } from "../../src/server/sign-in-refusals.js";

describe("refused sign-ins in the audit log", () => {
  it("records a few per address and window, then counts the rest and tells them with the next entry", () => {
    let now = 0;
    const refusals = new SignInRefusals({ perWindow: 3, windowMs: 1000, maxAddresses: 10 }, () => now);
    const taken = Array.from({ length: 7 }, () => refusals.take("10.0.0.1"));
    assert.deepEqual(
      taken.map((d) => d.record),
      [true, true, true, false, false, false, false],
    );
    assert.deepEqual(
      taken.map((d) => d.startsLeavingOut),
      [false, false, false, true, false, false, false],
      "one warning per window",
    );
    assert.equal(refusals.take("10.0.0.2").record, true, "another address has its own allowance");
    now = 1000;
    assert.deepEqual(refusals.take("10.0.0.1"), { record: true, leftOut: 4, startsLeavingOut: false });
    assert.deepEqual(refusals.take("10.0.0.1"), { record: true, leftOut: 0, startsLeavingOut: false });
  });

  it("remembers at most maxAddresses, forgetting the one renewed longest ago", () => {
    let now = 0;
    const refusals = new SignInRefusals({ perWindow: 1, windowMs: 1000, maxAddresses: 2 }, () => now);
    refusals.take("a");
    refusals.take("b");
    assert.equal(refusals.take("a").record, false, "a is over its allowance");
    refusals.take("c"); // forgets a, renewed longest ago (b was renewed after it)
    assert.equal(refusals.take("a").record, true, "a was forgotten");
    now = 10;
    assert.equal(refusals.take("c").record, false, "c is still remembered");
  });
});
