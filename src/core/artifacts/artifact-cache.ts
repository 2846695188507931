import { randomUUID } from "node:crypto";
import { renameSync, utimesSync } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../contract/index.js";

interface Entry {
  dir: string;
  bytes: number;
  usedAt: number;
}

/**
 * The artifacts cache `<workdir>/artifacts/<tenant>/<sha256>/` kept under a size
 * (artifacts.cache_size): when an artifact added takes it over that size, the least recently used entries go first,
 * never one a deploy of this server holds (from its fetch to its end). An entry's last use is its
 * directory's modification time, set again at each use, so the order survives a restart.
 */
export class ArtifactCache {
  /** Entry directory -> the deploys holding it. */
  private readonly holds = new Map<string, Set<string>>();
  private bytes = 0;
  /** Whether {@link bytes} was measured (at start, or by an eviction's walk): until then {@link added} walks. */
  private measured = false;
  /** Every byte {@link added} ever: what is added during an eviction's walk is counted after it (twice at worst: an earlier walk, never an over-full cache). */
  private addedBytes = 0;
  private bounding: Promise<void> = Promise.resolve();

  constructor(
    /** `<workdir>/artifacts`. */
    readonly root: string,
    readonly maxBytes: number,
    private readonly logger?: Logger,
  ) {}

  /** The directory of one tenant's artifact. */
  entryDir(tenant: string, sha256: string): string {
    return join(this.root, tenant, sha256);
  }

  /** The cache's size: measured at start and by each eviction's walk, plus the artifacts added since. */
  size(): number {
    return this.bytes;
  }

  /** Marks an entry as used by a deploy (idempotent): it is not evicted until {@link release}. */
  hold(holder: string, dir: string): void {
    let holders = this.holds.get(dir);
    if (!holders) this.holds.set(dir, (holders = new Set()));
    holders.add(holder);
  }

  /** Releases every entry a deploy holds. */
  release(holder: string): void {
    for (const [dir, holders] of this.holds) {
      holders.delete(holder);
      if (!holders.size) this.holds.delete(dir);
    }
  }

  /** Records a use of an entry (least recently used is evicted first). */
  async touch(dir: string): Promise<void> {
    // Synchronous: one call in the server's own workdir, at every fetch (the thread pool's round trip costs ten times its CPU).
    const now = new Date();
    try {
      utimesSync(dir, now, now);
    } catch {
      // an entry gone meanwhile has no use to record
    }
  }

  /**
   * Records an artifact added to the cache (its bytes), and bounds the cache when that takes it over
   * its size. The size is kept here, not walked after every fetch: a walk reads every entry of every
   * tenant, and under the size there is nothing to evict.
   */
  added(bytes: number): Promise<void> {
    this.bytes += bytes;
    this.addedBytes += bytes;
    return this.measured && this.bytes <= this.maxBytes ? Promise.resolve() : this.bound();
  }

  /** Evicts the least recently used entries no deploy holds until the cache is within its size; one at a time. */
  bound(): Promise<void> {
    // A failed eviction is logged, never the failure of the fetch that triggered it; the next one tries again.
    const run = this.bounding
      .then(() => this.evict())
      .catch((err: unknown) => this.logger?.warn("cannot evict from the artifacts cache", { error: String(err) }));
    this.bounding = run;
    return run;
  }

  private async evict(): Promise<void> {
    const addedBefore = this.addedBytes;
    const entries = await this.entries();
    let total = entries.reduce((sum, e) => sum + e.bytes, 0);
    for (const entry of entries.sort((a, b) => a.usedAt - b.usedAt)) {
      if (total <= this.maxBytes) break;
      if (this.holds.has(entry.dir)) continue;
      // Renamed away in the same tick as the check, so a fetch that holds it after this finds it gone and fetches again.
      const trash = `${entry.dir}.evicted-${randomUUID()}`;
      try {
        renameSync(entry.dir, trash);
      } catch {
        continue;
      }
      await rm(trash, { recursive: true, force: true });
      total -= entry.bytes;
      this.logger?.info("artifact evicted from the cache (artifacts.cache_size)", { entry: entry.dir, bytes: entry.bytes });
    }
    this.bytes = total + (this.addedBytes - addedBefore);
    this.measured = true;
  }

  /** Measures the cache (at start, for the metric). */
  async measure(): Promise<number> {
    const addedBefore = this.addedBytes;
    this.bytes = (await this.entries()).reduce((sum, e) => sum + e.bytes, 0) + (this.addedBytes - addedBefore);
    this.measured = true;
    return this.bytes;
  }

  private async entries(): Promise<Entry[]> {
    const out: Entry[] = [];
    for (const tenant of await names(this.root)) {
      const tenantDir = join(this.root, tenant);
      for (const sha of await names(tenantDir)) {
        const dir = join(tenantDir, sha);
        if (sha === "tmp") continue;
        if (sha.includes(".evicted-")) {
          await rm(dir, { recursive: true, force: true }); // what an eviction cut short left
          continue;
        }
        const info = await stat(dir).catch(() => undefined);
        if (!info?.isDirectory()) continue;
        let bytes = 0;
        for (const file of await names(dir)) bytes += (await stat(join(dir, file)).catch(() => undefined))?.size ?? 0;
        out.push({ dir, bytes, usedAt: info.mtimeMs });
      }
    }
    return out;
  }
}

async function names(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}
