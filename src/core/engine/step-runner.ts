import { DBOS, Error as DBOSErrors } from "@dbos-inc/dbos-sdk";
import { ResultError } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import type { DeployStore } from "./deploy-store.js";
import type { EngineMetrics } from "./engine-metrics.js";
import { faultPoint } from "./fault-points.js";
import { isUserCancel, userCancelled, type CancelWatch } from "./user-cancel.js";
import type { StepPolicy } from "./resolve.js";

export interface StepContext {
  /** Aborted when the deploy is cancelled or the attempt times out. */
  signal: AbortSignal;
  attempt: number;
}

/**
 * Runs one phase of a deploy as a DBOS step: checkpointed output, retries with exponential
 * backoff unless the error is permanent, a timeout per attempt, and the user-facing step record
 * (status, attempts, output, error) kept in the deploy store.
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
  let attempt = 0;
  const body = async (): Promise<T> => {
    attempt += 1;
    faultPoint(name, "before");
    // A cancel is checked inside the step (in the statement that records its start), so the answer
    // is checkpointed with it and a replay decides the same.
    if (!(await deps.store.stepStarted(deployId, seq, name, { unlessCancelled: cancellable && deps.cancels !== undefined })))
      throw userCancelled();
    const watch = cancellable ? deps.cancels?.watch(deployId) : undefined;
    const signals = [
      DBOS.stepStatus?.cancelSignal,
      policy.timeoutMs ? AbortSignal.timeout(policy.timeoutMs) : undefined,
      watch?.signal,
    ].filter((s): s is AbortSignal => s !== undefined);
    const signal = AbortSignal.any(signals);
    try {
      const output = await abortable(fn({ signal, attempt }), signal, name, policy.timeoutMs);
      faultPoint(name, "after");
      await deps.store.stepFinished(deployId, name, "succeeded", output);
      deps.metrics.stepAttempt(name, "succeeded");
      return output;
    } catch (err) {
      const e = ManentError.from(err);
      await deps.store.stepFinished(deployId, name, "failed", err instanceof ResultError ? err.result : undefined, e.toJSON());
      deps.metrics.stepAttempt(name, "failed");
      throw e;
    } finally {
      watch?.stop();
    }
  };
  try {
    const out = await DBOS.runStep(body, {
      name,
      retriesAllowed: policy.maxRetries > 0,
      maxAttempts: policy.maxRetries + 1,
      intervalSeconds: policy.intervalMs / 1000,
      backoffRate: 2,
      shouldRetry: (err: unknown) => !ManentError.from(err).permanent && !isUserCancel(err),
    });
    faultPoint(name, "checkpointed");
    return out;
  } catch (err) {
    // DBOS's cancellation error must reach the workflow as is: wrapped, the deploy would be recorded as failed.
    if (isCancellation(err)) throw err;
    throw unwrapStepError(err);
  }
}

/**
 * True for the errors DBOS throws in a workflow that was cancelled. Checked by class: DBOS's
 * errors keep the name "Error", so a check by name never matches.
 */
export function isCancellation(err: unknown): boolean {
  return err instanceof DBOSErrors.DBOSWorkflowCancelledError || err instanceof DBOSErrors.DBOSAwaitedWorkflowCancelledError;
}

/** DBOS reports exhausted retries as one error listing every attempt's; keep the last attempt's. */
export function unwrapStepError(err: unknown): ManentError {
  const errors = (err as { errors?: unknown[] } | null)?.errors;
  if (Array.isArray(errors) && errors.length > 0) {
    const last = ManentError.from(errors[errors.length - 1]);
    return new ManentError(last.code, `${last.message} (after ${errors.length} attempts)`, { details: last.details, cause: err });
  }
  return ManentError.from(err);
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
