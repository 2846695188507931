import { ManentError } from "../errors.js";
import type { Result } from "./types.js";

/**
 * A failed plugin call that still has per-target results to report (a deploy that failed on one
 * target of three). The engine records `result` with the error.
 */
export class ResultError extends ManentError {
  readonly result: Result;
  constructor(cause: ManentError, result: Result) {
    super(cause.code, cause.message, { cause, details: cause.details });
    this.result = result;
  }
}

/** Returns `result`, or throws a {@link ResultError} carrying it when `error` is set. */
export function resultOrThrow(result: Result, error: ManentError | undefined): Result {
  if (error) throw new ResultError(error, result);
  return result;
}
