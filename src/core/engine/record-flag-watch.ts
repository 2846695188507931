/**
 * Turns a flag kept on a deploy's record (a user's cancel, an admin's window override) into an
 * aborted signal for whatever waits on that deploy: at once when the flag is set through this
 * server (`notify`), within `pollMs` when it is set through another server of the fleet (read from
 * the database: one read every `pollMs` for all the deploys watched, however many run).
 */
export class RecordFlagWatch {
  private readonly waiting = new Map<string, Set<() => void>>();
  /** For each interval in use, its timer and how many watches of each deploy it polls for. */
  private readonly polls = new Map<number, { timer: NodeJS.Timeout; ids: Map<string, number> }>();

  constructor(
    /** Which of `ids` have the flag set. */
    private readonly setAmong: (ids: string[]) => Promise<ReadonlySet<string>>,
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
    const poll = this.poll(pollMs);
    poll.ids.set(id, (poll.ids.get(id) ?? 0) + 1);
    let stopped = false;
    return {
      signal: ac.signal,
      stop: () => {
        if (stopped) return;
        stopped = true;
        set.delete(fire);
        if (set.size === 0) this.waiting.delete(id);
        const left = poll.ids.get(id)! - 1;
        if (left > 0) poll.ids.set(id, left);
        else poll.ids.delete(id);
        if (poll.ids.size === 0) {
          clearInterval(poll.timer);
          this.polls.delete(pollMs);
        }
      },
    };
  }

  /** The flag of `id` was set by this server. */
  notify(id: string): void {
    for (const fire of this.waiting.get(id) ?? []) fire();
  }

  private poll(pollMs: number): { timer: NodeJS.Timeout; ids: Map<string, number> } {
    const existing = this.polls.get(pollMs);
    if (existing) return existing;
    const ids = new Map<string, number>();
    // One read at a time: the store's reads wait out an unavailable database (whileUnavailable), so
    // a read per tick regardless piled up one more waiting read every pollMs for as long as the
    // database was away (after an hour, thousands, each reconnecting: hundreds of connection
    // attempts a second and a burst of queries when it came back).
    let reading = false;
    const timer = setInterval(() => {
      if (reading) return;
      reading = true;
      this.setAmong([...ids.keys()])
        .then(
          (flagged) => {
            for (const id of flagged) this.notify(id);
          },
          () => undefined, // the read failed: the next poll asks again
        )
        .finally(() => (reading = false));
    }, pollMs);
    timer.unref();
    const poll = { timer, ids };
    this.polls.set(pollMs, poll);
    return poll;
  }
}
