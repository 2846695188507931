import type { WindowOverride } from "./deploy-windows.js";

/** An override given to a deploy already waiting for its window, as recorded. */
export interface RecordedWindowOverride extends WindowOverride {
  at: string;
}

/**
 * Where overrides of waiting deploys are kept: in the database, so the server running the wait
 * sees one given through another server of the fleet, and a wait resumed after a restart sees it.
 */
export interface WindowOverrideStore {
  /**
   * Records `override` for deploy `id` if it is queued and waiting for a deploy window now, in one
   * statement (a deploy that starts or is cancelled meanwhile is not overridden).
   */
  record(id: string, override: WindowOverride): Promise<"recorded" | "already" | "not_waiting" | "not_found">;
  find(id: string): Promise<RecordedWindowOverride | undefined>;
}

/**
 * Wakes a deploy waiting for its window when an admin overrides it: at once when the override
 * comes through this server, within `pollMs` when it comes through another server of the fleet.
 */
export class WindowOverrideWatch {
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(private readonly store: WindowOverrideStore) {}

  watch(id: string, pollMs: number): { signal: AbortSignal; stop(): void } {
    const ac = new AbortController();
    const fire = (): void => ac.abort();
    const set = this.waiting.get(id) ?? new Set<() => void>();
    set.add(fire);
    this.waiting.set(id, set);
    const timer = setInterval(() => {
      this.store.find(id).then(
        (o) => o && fire(),
        () => undefined, // the database is away: the next poll asks again
      );
    }, pollMs);
    timer.unref();
    return {
      signal: ac.signal,
      stop: () => {
        clearInterval(timer);
        set.delete(fire);
        if (set.size === 0) this.waiting.delete(id);
      },
    };
  }

  /** An override of `id` was recorded by this server. */
  notify(id: string): void {
    for (const fire of this.waiting.get(id) ?? []) fire();
  }
}
