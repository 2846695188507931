import { Code, ManentError } from "../errors.js";
import type { DeployStore } from "./deploy-store.js";
import { RecordFlagWatch } from "./record-flag-watch.js";

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
export class CancelWatch extends RecordFlagWatch {
  constructor(store: DeployStore, pollMs = 500) {
    super((ids) => store.cancelsRequested(ids), userCancelled, pollMs);
  }
}
