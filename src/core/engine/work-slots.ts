/**
 * The deploys of one server that may run their steps at once (`concurrency`), shared fairly among
 * tenants. A deploy holds a slot while it works and gives it back while it waits durably (a pause,
 * an approval, a soak, an analysis interval, the deploy of its key ahead of it: see
 * durable-waits.ts), so paused canaries never keep another deploy from starting. A free slot goes
 * to the waiting tenant that holds the fewest, among those the one served longest ago, and to its
 * longest-waiting deploy: a tenant with a thousand deploys queued takes the slots nobody else
 * wants, and another tenant's next deploy takes the next slot that frees. And no tenant holds more
 * than its share (`tenant_share` of the slots, at least one), so however long one tenant's deploys
 * run, the rest of the slots are there for the others at once.
 */
export class WorkSlots {
  /** Workflow id → the tenant whose slot it holds. */
  private readonly holders = new Map<string, string>();
  private readonly heldBy = new Map<string, number>();
  /** Per tenant, the deploys waiting for a slot, oldest first. */
  private readonly queues = new Map<string, { id: string; granted: () => void }[]>();
  /** Workflows that gave their slot back for a durable wait: their tenant, to take one again after. */
  private readonly suspended = new Map<string, string>();
  /** When each tenant was last given a slot (a count of grants): ties go to the one served longest ago. */
  private readonly servedAt = new Map<string, number>();
  private grants = 0;

  /** The most slots one tenant holds at once. */
  private readonly perTenant: number;

  constructor(
    private readonly capacity: number,
    tenantShare = 1,
  ) {
    this.perTenant = Math.max(1, Math.floor(capacity * tenantShare));
  }

  /** Resolves once workflow `id` of `tenant` holds a slot (at once when it holds one already). */
  acquire(id: string, tenant: string): Promise<void> {
    if (this.holders.has(id)) return Promise.resolve();
    return new Promise<void>((granted) => {
      const queue = this.queues.get(tenant) ?? [];
      queue.push({ id, granted });
      this.queues.set(tenant, queue);
      this.grant();
    });
  }

  /** Gives back the slot of `id` for good (its run ended). */
  release(id: string): void {
    this.suspended.delete(id);
    this.free(id);
  }

  /** Gives back the slot of `id` while it waits durably; {@link resume} takes one again. */
  suspend(id: string): void {
    const tenant = this.holders.get(id);
    if (tenant === undefined) return;
    this.suspended.set(id, tenant);
    this.free(id);
  }

  /** After a durable wait: takes a slot again for a workflow that {@link suspend}ed its own. */
  async resume(id: string): Promise<void> {
    const tenant = this.suspended.get(id);
    if (tenant === undefined) return;
    this.suspended.delete(id);
    await this.acquire(id, tenant);
  }

  /** How many slots are held, and how many deploys wait for one (metrics, tests). */
  usage(): { held: number; waiting: number } {
    let waiting = 0;
    for (const q of this.queues.values()) waiting += q.length;
    return { held: this.holders.size, waiting };
  }

  private free(id: string): void {
    const tenant = this.holders.get(id);
    if (tenant === undefined) return;
    this.holders.delete(id);
    const n = (this.heldBy.get(tenant) ?? 1) - 1;
    if (n > 0) this.heldBy.set(tenant, n);
    else this.heldBy.delete(tenant);
    this.grant();
  }

  private grant(): void {
    while (this.holders.size < this.capacity) {
      let best: string | undefined;
      for (const [tenant, queue] of this.queues) {
        if (queue.length === 0 || (this.heldBy.get(tenant) ?? 0) >= this.perTenant) continue;
        if (best === undefined) {
          best = tenant;
          continue;
        }
        const [held, bestHeld] = [this.heldBy.get(tenant) ?? 0, this.heldBy.get(best) ?? 0];
        const [served, bestServed] = [this.servedAt.get(tenant) ?? -1, this.servedAt.get(best) ?? -1];
        if (held < bestHeld || (held === bestHeld && served < bestServed)) best = tenant;
      }
      if (best === undefined) return;
      const queue = this.queues.get(best)!;
      const next = queue.shift()!;
      if (queue.length === 0) this.queues.delete(best);
      this.holders.set(next.id, best);
      this.heldBy.set(best, (this.heldBy.get(best) ?? 0) + 1);
      this.servedAt.set(best, this.grants++);
      next.granted();
    }
  }
}
