import { DBOS } from "@dbos-inc/dbos-sdk";
import { getExecutor } from "@dbos-inc/dbos-sdk/internal/dbos";
import { terminalStatuses, type DeployRecord, type DeployStore } from "../engine/deploy-store.js";
import { Code, ManentError } from "../errors.js";
import { checkApprover, type Actor } from "./approvals.js";
import type { CommandName, CommandRecord } from "./rollout-state.js";

/** The DBOS topic operator commands are sent on; the workflow reads it with DBOS.recv. */
export const commandTopic = "manent.rollout";

/** What travels to the workflow (durably, in DBOS's notifications table). */
export interface CommandMessage {
  command: CommandName;
  full: boolean;
  by: string | null;
  /** The sender's principal id: an approval counts once per id (absent in messages of older servers). */
  by_id?: string;
  /** When it was sent (as recorded on the deploy): an approval's time, the same after a resume. */
  at?: string;
  /** Set when the abort comes from `manent cancel`. */
  cancel?: boolean;
  /** The pause or approval it was sent to end: an approve never ends a later wait. */
  step?: string;
}

/**
 * Records an operator command on the deploy and sends it to its workflow. The message is kept by
 * DBOS until the workflow reads it, so a command sent while the deploy's server is down (through
 * another server) is acted on when the workflow resumes. Refuses a command the rollout cannot take,
 * and an approval (an approve, or a plain promote during an approval: it counts as the sender's
 * approval) from someone the approval's requirements exclude (see approvals.ts).
 */
export async function sendRolloutCommand(
  store: DeployStore,
  deploy: DeployRecord,
  command: CommandName,
  opts: { full?: boolean; by: Actor | string | null; cancel?: boolean },
): Promise<CommandRecord> {
  const id = deploy.id;
  if (terminalStatuses.has(deploy.status))
    throw new ManentError(Code.FailedPrecondition, `deploy ${id} has already ended (${deploy.status})`);
  const rollout = deploy.rollout;
  if (!rollout || deploy.status !== "running") {
    throw new ManentError(
      Code.FailedPrecondition,
      `deploy ${id} has no rollout in progress (no waves or canary running)${command === "abort" ? "; use manent cancel" : ""}`,
    );
  }
  const waiting = rollout.waiting;
  const full = command === "promote" && opts.full === true;
  if (command === "approve" && waiting?.kind !== "approval") {
    throw new ManentError(Code.FailedPrecondition, `deploy ${id} is not waiting for an approval${waiting ? ` (${waiting.hint})` : ""}`);
  }
  if (command === "promote" && !full && !waiting) {
    throw new ManentError(Code.FailedPrecondition, `deploy ${id} is not paused; manent promote --full skips every remaining step`);
  }
  // A name alone (a cancel by a user the engine knows by name) is no approver.
  const actor = typeof opts.by === "string" || opts.by === null ? undefined : opts.by;
  const by = typeof opts.by === "string" || opts.by === null ? opts.by : opts.by.name;
  if (waiting?.kind === "approval" && (command === "approve" || (command === "promote" && !full))) {
    if (!actor) throw new ManentError(Code.PermissionDenied, `deploy ${id}: an approval needs a known approver`);
    checkApprover(deploy, waiting, rollout.approvals, actor, command);
  }
  const at = new Date().toISOString();
  const record: CommandRecord = {
    command,
    full,
    by,
    at,
    during: waiting?.step ?? describeProgress(deploy),
  };
  await store.recordCommand(id, record);
  const message: CommandMessage = {
    command,
    full,
    by,
    ...(actor && { by_id: actor.id }),
    at,
    ...(opts.cancel && { cancel: true }),
    ...(waiting && { step: waiting.step }),
  };
  await DBOS.send(id, message, commandTopic);
  wakeLocalReceiver(id);
  return record;
}

/**
 * Wakes the workflow's DBOS.recv at once when it waits in this process. DBOS wakes it through a
 * Postgres NOTIFY, which is lost while its LISTEN connection is down (a Postgres restart, a network
 * blip, the first seconds after start): the recv then finds the message only at its next poll. The
 * message is committed by now, so the woken recv reads it; in another process the recv's own poll
 * (command-inbox.ts) bounds the wait.
 */
export function wakeLocalReceiver(workflowId: string, topic = commandTopic): void {
  try {
    getExecutor().systemDatabase.notificationsMap.callCallbacks(`${workflowId}::${topic}`);
  } catch {
    // DBOS's internals differ: the NOTIFY and the recv's poll still deliver the message.
  }
}

function describeProgress(d: DeployRecord): string | null {
  const r = d.rollout;
  if (!r) return null;
  if (r.canary && r.canary.step > 0 && r.canary.step <= r.canary.steps.length)
    return `canary step ${r.canary.step} (${r.canary.steps[r.canary.step - 1]})`;
  if (r.canary) return `canary ${r.canary.phase}`;
  return r.current_wave !== null ? `wave ${r.current_wave}` : null;
}
