import { setTimeout as delay } from "node:timers/promises";
import { DBOS, Error as DBOSErrors } from "@dbos-inc/dbos-sdk";
// DBOS's ownership token of the running execution, which its own step records are checked against.
import { currentOwnerXid } from "@dbos-inc/dbos-sdk/internal/context";
import { ResultError } from "../contract/index.js";
import { Code, ManentError, type ErrorJSON } from "../errors.js";
import type { DeployStore, StepEnd, StepOwner } from "./deploy-store.js";
import type { EngineMetrics } from "./engine-metrics.js";
import { faultPoint } from "./fault-points.js";
import { isUserCancel, userCancelled, type CancelWatch } from "./user-cancel.js";
import type { StepPolicy } from "./resolve.js";

export interface StepContext {
  /** Aborted when the deploy is cancelled or the attempt times out. */
  signal: AbortSignal;
  attempt: number;
  /** No attempt of this step started before this one, in this execution or one a crash ended (its record counts them). */
  firstRun: boolean;
}

/** Longest wait between two attempts of a step (DBOS's cap too). */
const maxRetryIntervalMs = 3_600_000;

/**
 * Runs one phase of a deploy as a checkpointed step: retries with exponential backoff unless the
 * error is permanent, a timeout per attempt, and the user-facing step record (status, attempts,
 * output, error) kept in the deploy store, which is also the step's checkpoint. An attempt costs
 * two statements (its start, its end with its result and events), where a DBOS step around the
 * record cost six: DBOS's cancel checks, its checkpoint read and its checkpoint write, beside the
 * record's start and end. A success's end is held for the deploy's next statement (see
 * `WriteHold`), so a step after another costs one commit.
 *
 * What DBOS's steps guarantee is kept: a replay of the workflow (a crash, a recovery on another
 * server) returns the step's recorded outcome without running it again; a step that had started
 * runs again; a cancelled workflow stops at its next step; and a step is recorded only by the
 * execution that owns the workflow (DBOS's ownership token, checked with its row locked, as DBOS
 * records a step): a second copy stops with DBOS's conflict error instead of recording it twice.
 */
export async function runStep<T>(
  deps: { store: DeployStore; metrics: EngineMetrics; cancels?: CancelWatch },
  deployId: string,
  seq: number,
  name: string,
  policy: StepPolicy,
  fn: (ctx: StepContext) => Promise<T>,
  /** A user's cancel stops this step (at its start, or by aborting its signal while it runs). */
  cancellable = false,
): Promise<T> {
  const owner = stepOwner();
  const maxAttempts = policy.maxRetries + 1;
  let intervalMs = policy.intervalMs;
  for (let attempt = 1; ; attempt++) {
    // A cancel is checked in the statement that records the start, so a replay decides the same:
    // the flag, once set, stays.
    const begin = await deps.store.beginStep(deployId, seq, name, {
      unlessCancelled: cancellable && deps.cancels !== undefined,
      owner,
    });
    if (!begin.run) {
      switch (begin.reason) {
        case "checkpointed":
          if (begin.status === "succeeded") return begin.output as T;
          throw replayedError(begin.error, begin.exhausted, begin.attempts);
        case "user_cancel":
          throw userCancelled();
        case "workflow_cancelled":
          throw new DBOSErrors.DBOSWorkflowCancelledError(owner?.workflowId ?? deployId);
        case "not_owner":
          throw new DBOSErrors.DBOSWorkflowConflictError(owner?.workflowId ?? deployId);
      }
    }
    faultPoint(name, "before");
    const watch = cancellable ? deps.cancels?.watch(deployId) : undefined;
    const signals = [policy.timeoutMs ? AbortSignal.timeout(policy.timeoutMs) : undefined, watch?.signal].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    const signal = AbortSignal.any(signals);
    let failure: ManentError;
    let failedOutput: unknown;
    try {
      const output = await abortable(fn({ signal, attempt, firstRun: begin.attempt === 1 }), signal, name, policy.timeoutMs);
      faultPoint(name, "after");
      // What a replay will return (the record's JSON), returned now too: both runs see the same value.
      const recorded = output === undefined ? undefined : (JSON.parse(JSON.stringify(output)) as T);
      // Committed with the deploy's next statement (the next step's start, most often): one commit for both.
      await deps.store.endStep(deployId, name, begin.attempt, { status: "succeeded", output: recorded, final: "ended" }, owner, {
        lost: () => new DBOSErrors.DBOSWorkflowConflictError(owner?.workflowId ?? deployId),
        committed: () => faultPoint(name, "checkpointed"),
      });
      deps.metrics.stepAttempt(name, "succeeded");
      return recorded as T;
    } catch (err) {
      if (isCancellation(err)) throw err;
      failure = ManentError.from(err);
      failedOutput = err instanceof ResultError ? err.result : undefined;
    } finally {
      watch?.stop();
    }
    const retry = attempt < maxAttempts && !failure.permanent && !isUserCancel(failure);
    const exhausted = !retry && maxAttempts > 1 && !failure.permanent && !isUserCancel(failure);
    const final = retry ? false : exhausted ? "exhausted" : "ended";
    await ended(
      deps.store,
      deployId,
      name,
      begin.attempt,
      { status: "failed", output: failedOutput, error: failure.toJSON(), final },
      owner,
    );
    deps.metrics.stepAttempt(name, "failed");
    if (!retry) {
      faultPoint(name, "checkpointed");
      throw exhausted ? afterAttempts(failure, begin.attempt) : failure;
    }
    await delay(intervalMs);
    intervalMs = Math.min(intervalMs * 2, maxRetryIntervalMs);
  }
}

/** Records an attempt's end; an execution that no longer owns the step stops with DBOS's conflict error. */
async function ended(
  store: DeployStore,
  deployId: string,
  name: string,
  attempt: number,
  end: StepEnd,
  owner: StepOwner | undefined,
): Promise<void> {
  if (!(await store.endStep(deployId, name, attempt, end, owner))) {
    throw new DBOSErrors.DBOSWorkflowConflictError(owner?.workflowId ?? deployId);
  }
}

/** The DBOS workflow running this code and this execution's ownership token; none outside a workflow. */
function stepOwner(): StepOwner | undefined {
  const workflowId = DBOS.workflowID;
  if (workflowId === undefined) return undefined;
  const token = currentOwnerXid(workflowId);
  return token === undefined ? undefined : { workflowId, token };
}

/** A step's recorded failure, thrown again by a replay as the first run threw it. */
function replayedError(error: ErrorJSON | null, exhausted: boolean, attempts: number): ManentError {
  const e = error ? ManentError.fromJSON(error) : new ManentError(Code.Unknown, "step failed");
  return exhausted ? afterAttempts(e, attempts) : e;
}

/** The last attempt's error of a step whose retries ran out, saying how many attempts were made. */
function afterAttempts(last: ManentError, attempts: number): ManentError {
  return new ManentError(last.code, `${last.message} (after ${attempts} attempts)`, { details: last.details, cause: last });
}

/**
 * True for the errors DBOS throws in a workflow that was cancelled, and for any error once DBOS
 * stopped in this process (see {@link stoppedHere}). Checked by class: DBOS's errors keep the name
 * "Error", so a check by name never matches.
 */
export function isCancellation(err: unknown): boolean {
  return (
    err instanceof DBOSErrors.DBOSWorkflowCancelledError ||
    err instanceof DBOSErrors.DBOSAwaitedWorkflowCancelledError ||
    // This execution no longer owns the workflow (another server recovered it): it stops, recording nothing.
    err instanceof DBOSErrors.DBOSWorkflowConflictError ||
    stoppedHere()
  );
}

/**
 * Whether DBOS has stopped (or is stopping) in this process. A server's shutdown does not wait for
 * the workflows that wait durably (an approval, a pause, an analysis interval: engine.shutdown), so
 * such a workflow may wake after it, and whatever it calls then fails (DBOS's "`DBOS.launch()` must
 * be called before running steps", a closed pool). That failure is this process's, not the
 * deploy's: recorded, it ended a deploy waiting at its approval as failed on every graceful
 * restart that caught it awake. Its run here stops, recording nothing, and the next start or
 * another server resumes the workflow from its checkpoints.
 */
export function stoppedHere(): boolean {
  return !DBOS.isInitialized();
}

/** Settles with the work or with the signal, whichever comes first, so a call that ignores its signal cannot hang a step. */
function abortable<T>(work: Promise<T>, signal: AbortSignal, step: string, timeoutMs: number | undefined): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal, step, timeoutMs));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal, step, timeoutMs));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e instanceof Error ? e : ManentError.from(e));
      },
    );
  });
}

function abortError(signal: AbortSignal, step: string, timeoutMs: number | undefined): ManentError {
  const reason = signal.reason as { name?: string } | undefined;
  if (reason instanceof ManentError) return reason;
  if (reason?.name === "TimeoutError") {
    return new ManentError(Code.DeadlineExceeded, `step ${step} timed out after ${Math.round((timeoutMs ?? 0) / 1000)}s`);
  }
  return new ManentError(Code.Canceled, `step ${step} cancelled`);
}
