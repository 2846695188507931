/** What to do with one refused sign-in. */
export interface RefusalDecision {
  /** Audit it as one entry. */
  record: boolean;
  /** Refusals from the same address left out of the log since its last entry (told in this one). */
  leftOut: number;
  /** This refusal is the first one left out in its window: worth one warning in the server's log. */
  startsLeavingOut: boolean;
}

export interface RefusalLimits {
  /** Entries per address and window; more refusals are counted, not written one by one. */
  perWindow: number;
  windowMs: number;
  /** Addresses remembered at once; the one seen longest ago is forgotten first. */
  maxAddresses: number;
}

/**
 * Keeps refused sign-ins from filling the append-only audit log: a client guessing tokens gets
 * `perWindow` entries per window, and the next entry from it says how many were left out, so
 * the log stays a true account without one row per guess. Bounded in memory by `maxAddresses`.
 */
export class SignInRefusals {
  private readonly byAddress = new Map<string, { since: number; recorded: number; leftOut: number }>();

  constructor(
    private readonly limits: RefusalLimits = { perWindow: 10, windowMs: 60_000, maxAddresses: 10_000 },
    private readonly now: () => number = Date.now,
  ) {}

  take(address: string | null): RefusalDecision {
    const key = address ?? "unknown";
    const at = this.now();
    const seen = this.byAddress.get(key);
    if (!seen || at - seen.since >= this.limits.windowMs) {
      // A new window; re-inserted so the map's order is the order addresses were last renewed.
      this.byAddress.delete(key);
      this.byAddress.set(key, { since: at, recorded: 1, leftOut: 0 });
      if (this.byAddress.size > this.limits.maxAddresses) this.byAddress.delete(this.byAddress.keys().next().value!);
      return { record: true, leftOut: seen?.leftOut ?? 0, startsLeavingOut: false };
    }
    if (seen.recorded < this.limits.perWindow) {
      seen.recorded++;
      const leftOut = seen.leftOut;
      seen.leftOut = 0;
      return { record: true, leftOut, startsLeavingOut: false };
    }
    seen.leftOut++;
    return { record: false, leftOut: 0, startsLeavingOut: seen.leftOut === 1 };
  }
}
