import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ManentError, TargetStatus, forAllTargets, forEachTarget, permanent, type Target } from "../../src/plugin.js";

const targets = (n: number): Target[] => Array.from({ length: n }, (_, i) => ({ host: `h${i}`, labels: {} }));
const signal = new AbortController().signal;

describe("forEachTarget", () => {
  it("keeps the order of the targets whatever order they finish in, and measures each", async () => {
    const out = await forEachTarget({ targets: targets(4), parallelism: 4, signal }, async (t) => {
      await new Promise((r) => setTimeout(r, (4 - Number(t.host.slice(1))) * 5));
      return { details: { seen: t.host } };
    });
    assert.equal(out.error, undefined);
    assert.deepEqual(
      out.targets.map((t) => t.host),
      ["h0", "h1", "h2", "h3"],
    );
    assert.ok(out.targets.every((t) => t.status === TargetStatus.Deployed && typeof t.duration_ms === "number"));
    assert.deepEqual(
      out.targets.map((t) => t.details?.seen),
      ["h0", "h1", "h2", "h3"],
    );
  });

  it("never runs more than `parallelism` targets at once", async () => {
    let running = 0;
    let peak = 0;
    await forEachTarget({ targets: targets(12), parallelism: 3, signal }, async () => {
      peak = Math.max(peak, ++running);
      await new Promise((r) => setImmediate(r));
      running--;
      return {};
    });
    assert.equal(peak, 3);
  });

  it("stops starting targets after the first error, lets running ones finish, reports the rest as skipped", async () => {
    const started: string[] = [];
    const out = await forEachTarget({ targets: targets(6), parallelism: 2, signal }, async (t) => {
      started.push(t.host);
      if (t.host === "h1") throw permanent(new Error("boom on h1"));
      await new Promise((r) => setImmediate(r));
      return {};
    });
    assert.deepEqual(started, ["h0", "h1"]);
    assert.deepEqual(
      out.targets.map((t) => t.status),
      ["deployed", "failed", "skipped", "skipped", "skipped", "skipped"],
    );
    assert.equal(out.targets[1]!.error, "boom on h1");
    assert.equal(out.error?.code, Code.Aborted);
    assert.equal(out.error?.permanent, true);
  });

  it("treats parallelism 0 (earlier hosts) as 1", async () => {
    let running = 0;
    let peak = 0;
    await forEachTarget({ targets: targets(3), parallelism: 0, signal }, async () => {
      peak = Math.max(peak, ++running);
      await new Promise((r) => setImmediate(r));
      running--;
      return {};
    });
    assert.equal(peak, 1);
  });

  it("starts nothing more once the signal is aborted and says the deploy was cancelled", async () => {
    const ac = new AbortController();
    const out = await forEachTarget({ targets: targets(3), parallelism: 1, signal: ac.signal }, async () => {
      ac.abort();
      return {};
    });
    assert.deepEqual(
      out.targets.map((t) => t.status),
      ["deployed", "skipped", "skipped"],
    );
    assert.equal(out.error?.code, Code.Canceled);
  });
});

describe("forAllTargets", () => {
  it("runs every target even after failures and combines the errors", async () => {
    const out = await forAllTargets({ targets: targets(4), parallelism: 1, signal }, async (t) => {
      if (t.host === "h0" || t.host === "h2") throw new ManentError(Code.Unavailable, `${t.host} down`);
      return { status: TargetStatus.RolledBack };
    });
    assert.deepEqual(
      out.targets.map((t) => t.status),
      ["failed", "rolled_back", "failed", "rolled_back"],
    );
    assert.match(out.error!.message, /2 targets failed: h0 down; h2 down/);
    assert.equal(out.error!.permanent, false);
  });

  it("reports progress for every finished target", async () => {
    const seen: string[] = [];
    await forAllTargets(
      { targets: targets(3), parallelism: 2, signal, progress: (r) => seen.push(`${r.host}:${r.status}`) },
      async () => ({}),
    );
    assert.deepEqual(seen.sort(), ["h0:deployed", "h1:deployed", "h2:deployed"]);
  });
});
