import assert from "node:assert/strict";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
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
});
