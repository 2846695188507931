import assert from "node:assert/strict";
import { mkdir, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ArtifactCache } from "../../src/core/artifacts/artifact-cache.js";
import { createWorkspace } from "../support/workspace.js";

/** The artifacts cache's bound: least recently used first, never an entry a deploy holds. */
describe("artifacts cache bound", () => {
  const setup = async () => {
    const ws = await createWorkspace();
    const root = ws.path("artifacts");
    const cache = new ArtifactCache(root, 3000);
    // Four entries of 1000 bytes, used at t=1..4 (seconds since the epoch: only the order matters).
    const entries = ["a", "b", "c", "d"].map((c) => cache.entryDir(c === "d" ? "team-b" : "team-a", c.repeat(64)));
    for (const [i, dir] of entries.entries()) {
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, "app.txt"), "x".repeat(1000));
      await utimes(dir, i + 1, i + 1);
    }
    await mkdir(join(root, "team-a", "tmp"), { recursive: true });
    return { root, cache, entries };
  };
  const left = async (root: string) =>
    (await Promise.all(["team-a", "team-b"].map(async (t) => (await readdir(join(root, t))).filter((e) => e !== "tmp").map((e) => e[0]))))
      .flat()
      .sort();

  it("evicts the least recently used entries until the cache is within its size", async () => {
    const { root, cache } = await setup();
    assert.equal(await cache.measure(), 4000);
    await cache.bound();
    assert.deepEqual(await left(root), ["b", "c", "d"]);
    assert.equal(cache.size(), 3000);
  });

  it("never evicts an entry a deploy holds, and evicts it once released; a use moves an entry to the back", async () => {
    const { root, cache, entries } = await setup();
    cache.hold("deploy-1", entries[0]!);
    cache.hold("deploy-2", entries[0]!);
    await cache.touch(entries[1]!); // b used now: c is the least recently used free entry
    await cache.bound();
    assert.deepEqual(await left(root), ["a", "b", "d"]);
    cache.release("deploy-1");
    await writeFile(join(entries[3]!, "more.txt"), "x".repeat(1000)); // 4000 bytes again
    await utimes(entries[3]!, 4, 4);
    await cache.bound();
    assert.deepEqual(await left(root), ["a", "b"], "a is still held by deploy-2: d, the least recently used free entry, goes");
    cache.release("deploy-2");
    await cache.bound();
    assert.deepEqual(await left(root), ["a", "b"], "within its size: nothing more goes");
  });

  it("keeps its size as artifacts are added, and evicts only when an addition takes it over its size", async () => {
    const { root, cache, entries } = await setup();
    await rm(entries[3]!, { recursive: true });
    assert.equal(await cache.measure(), 3000);
    // Under (or at) its size, an addition is counted, nothing walked: a file the cache does not
    // know of (put there behind its back) goes unseen, and nothing is evicted.
    await writeFile(join(entries[0]!, "unknown.txt"), "x".repeat(500));
    await utimes(entries[0]!, 1, 1); // still the least recently used
    await cache.added(0);
    assert.equal(cache.size(), 3000);
    assert.deepEqual(await left(root), ["a", "b", "c"]);
    // An entry added takes it over: it is measured again (with that file) and the least recently used go.
    const e = cache.entryDir("team-b", "e".repeat(64));
    await mkdir(e, { recursive: true });
    await writeFile(join(e, "app.txt"), "x".repeat(1000));
    await cache.added(1000);
    assert.deepEqual(await left(root), ["b", "c", "e"], "a went, with the file it did not know of: 4500 - 1500 bytes left");
    assert.equal(cache.size(), 3000);
  });

  it("walks the cache at the first addition when it was never measured", async () => {
    const { root, cache } = await setup();
    await cache.added(0);
    assert.deepEqual(await left(root), ["b", "c", "d"]);
    assert.equal(cache.size(), 3000);
  });
});
