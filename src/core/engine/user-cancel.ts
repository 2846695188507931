import { Code, ManentError } from "../errors.js";
import type { DeployStore } from "./deploy-store.js";

/**
 * A user's cancel, as it reaches a running deploy. It is not DBOS's workflow cancellation: that
 * would stop the workflow wherever it is, even after its deploy step had changed the targets, and
 * the record would say `cancelled` over a new release. A user's cancel is a flag on the deploy
 * record that the workflow reads at its step boundaries (and while a step runs), so the workflow
 * itself decides what the cancel means at that point: see README "What a cancel does".
 */
export function userCancelled(): ManentError {
  return new ManentError(Code.Canceled, "cancelled by a user", { details: { cancelled_by: "user" } });
}

export function isUserCancel(err: unknown): boolean {
  const e = ManentError.from(err);
  return e.code === Code.Canceled && e.details.cancelled_by === "user";
}

/**
 * Turns a user's cancel into an aborted signal for the step that is running: at once when the
 * cancel comes through this server, within `pollMs` when it comes through another server of the
 * fleet (read from the deploy record).
 */
export class CancelWatch {
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(
    private readonly store: DeployStore,
    private readonly pollMs = 500,
  ) {}

  /** `pollMs`: how often the record is read for a cancel taken by another server (a long wait reads it less often). */
  watch(id: string, pollMs = this.pollMs): { signal: AbortSignal; stop(): void } {
    const ac = new AbortController();
    const fire = (): void => ac.abort(userCancelled());
    const set = this.waiting.get(id) ?? new Set<() => void>();
    set.add(fire);
    this.waiting.set(id, set);
    const timer = setInterval(() => {
      this.store.cancelRequested(id).then(
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

  /** A cancel of `id` was recorded by this server. */
  notify(id: string): void {
    for (const fire of this.waiting.get(id) ?? []) fire();
  }
}
