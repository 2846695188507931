import type { WorkSlots } from "./work-slots.js";

/**
 * The workflows of this process that wait durably right now: on a pause, an approval or an
 * analysis interval, whose deadline is recorded in a checkpointed step. A shutdown need not wait
 * for them: another server or the next start resumes each wait with what remains of it.
 */
export class DurableWaits {
  private readonly waiting = new Map<string, number>();
  private wake: (() => void) | undefined;

  /** `slots`: the work slots a deploy gives back while it waits (work-slots.ts). */
  constructor(readonly slots?: WorkSlots) {}

  /**
   * Runs `wait` with workflow `id` counted as waiting durably until it returns. A deploy holding a
   * work slot gives it back meanwhile and takes one again before it goes on.
   */
  async during<T>(id: string | undefined, wait: () => Promise<T>): Promise<T> {
    if (id === undefined) return wait();
    const first = !this.waiting.has(id);
    this.waiting.set(id, (this.waiting.get(id) ?? 0) + 1);
    this.changed();
    // Waits may nest or overlap (a pause inside a wave's gate): the slot goes at the first, comes back after the last.
    if (first) this.slots?.suspend(id);
    try {
      return await wait();
    } finally {
      const n = (this.waiting.get(id) ?? 1) - 1;
      // Still counted as waiting while it waits for a slot: a shutdown need not wait for it.
      if (n === 0) await this.slots?.resume(id);
      if (n > 0) this.waiting.set(id, n);
      else this.waiting.delete(id);
      this.changed();
    }
  }

  /**
   * Resolves once every workflow `running()` lists (id → the promises that settle when its runs
   * end) waits durably or has ended, or when `timeoutMs` is over: with those still running, split.
   */
  async settle(running: () => Map<string, Promise<unknown>[]>, timeoutMs: number): Promise<{ waiting: string[]; busy: string[] }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = running();
      const busy = [...now.keys()].filter((id) => !this.waiting.has(id));
      const waiting = [...now.keys()].filter((id) => this.waiting.has(id));
      const left = deadline - Date.now();
      if (busy.length === 0 || left <= 0) return { waiting, busy };
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        ...busy.flatMap((id) => now.get(id) ?? []).map((p) => p.then(noop, noop)),
        new Promise<void>((r) => (this.wake = r)),
        new Promise<void>((r) => (timer = setTimeout(r, left))),
      ]);
      clearTimeout(timer);
      this.wake = undefined;
    }
  }

  private changed(): void {
    this.wake?.();
  }
}

function noop(): void {}
