/**
 * A count per key for the `limit` most recently counted keys; past the limit the least recently
 * counted key is forgotten. For per-deploy state that must not grow with every deploy a long-lived
 * server runs (10,000 deploys would otherwise keep 10,000 entries for good).
 */
export class RecentCounts {
  private readonly counts = new Map<string, number>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  }

  /** Adds one to `key`'s count and returns the new count (1 for a key not counted or forgotten). */
  increment(key: string): number {
    const n = (this.counts.get(key) ?? 0) + 1;
    // Re-inserted so the Map's insertion order is the order of last use: the first key is the oldest.
    this.counts.delete(key);
    this.counts.set(key, n);
    if (this.counts.size > this.limit) this.counts.delete(this.counts.keys().next().value!);
    return n;
  }

  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  get size(): number {
    return this.counts.size;
  }
}
