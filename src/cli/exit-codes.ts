import { Code, type ManentError } from "../core/errors.js";

/** The CLI's exit codes. */
export const Exit = {
  /** The deploy (or command) succeeded. */
  Ok: 0,
  /** The deploy ran and failed, was rolled back or was cancelled. */
  DeployFailed: 1,
  /** `manent auth can-i`: the answer is no. */
  No: 1,
  /** `manent diff`: a target no longer runs what was deployed. */
  Drifted: 1,
  /** Bad input: a malformed or invalid file, an unknown flag, a refused submission. */
  BadInput: 2,
  /** The server could not be reached, refused the token (401) or the permission (403), or failed. */
  ServerError: 3,
} as const;

export function exitCodeFor(err: ManentError): number {
  switch (err.code) {
    case Code.InvalidArgument:
    case Code.NotFound:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
    case Code.AlreadyExists:
    case Code.Aborted: // e.g. an upload a deploy still needs, not deleted
    case Code.ResourceExhausted: // an upload over its tenant's quota
      return Exit.BadInput;
    default:
      return Exit.ServerError;
  }
}
