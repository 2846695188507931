/**
 * Turns a flag kept on a deploy's record (a user's cancel, an admin's window override) into an
 * aborted signal for whatever waits on that deploy: at once when the flag is set through this
 * server (`notify`), within `pollMs` when it is set through another server of the fleet (`isSet`
 * read from the database).
 */
export class RecordFlagWatch {
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(
    private readonly isSet: (id: string) => Promise<boolean>,
    /** What the signal is aborted with. */
    private readonly reason: () => unknown,
    private readonly pollMs: number,
  ) {}

  watch(id: string, pollMs = this.pollMs): { signal: AbortSignal; stop(): void } {
    const ac = new AbortController();
    const fire = (): void => ac.abort(this.reason());
    const set = this.waiting.get(id) ?? new Set<() => void>();
    set.add(fire);
    this.waiting.set(id, set);
    const timer = setInterval(() => {
      this.isSet(id).then(
        (yes) => yes && fire(),
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

  /** The flag of `id` was set by this server. */
  notify(id: string): void {
    for (const fire of this.waiting.get(id) ?? []) fire();
  }
}
