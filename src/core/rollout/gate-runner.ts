import { DBOS } from "@dbos-inc/dbos-sdk";
import { Code, ManentError } from "../errors.js";
import { faultPoint } from "../engine/fault-points.js";
import { approvalHint, approvalsAt, requirementOf } from "./approvals.js";
import type { CommandInbox } from "./command-inbox.js";
import type { CommandMessage } from "./rollout-commands.js";
import { formatMs, type ApproversSettings } from "./rollout-config.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";
import type { ApprovalRecord } from "./rollout-state.js";

/** Ends a rollout early: an abort, a timed-out approval, a failed analysis. The message says which step and why. */
export class RolloutStopped extends ManentError {
  constructor(
    code: Code,
    message: string,
    /** Set when an operator's command stopped it. */
    readonly command?: CommandMessage,
    details?: Record<string, string>,
  ) {
    super(code, message, details ? { details } : {});
  }
}

export function abortedBy(m: CommandMessage, where: string): RolloutStopped {
  const who = m.by ? ` by ${m.by}` : "";
  if (m.cancel) return new RolloutStopped(Code.Canceled, `cancelled${who} during ${where}`, m, { cancelled_by: "user" });
  return new RolloutStopped(Code.Aborted, `aborted${who} during ${where}`, m);
}

/** A background check failed while the rollout was at `where`: `reason` names the check, its value and the condition. */
export function backgroundStopped(reason: string, where: string): RolloutStopped {
  return new RolloutStopped(Code.Aborted, `background analysis failed during ${where}: ${reason}`);
}

/**
 * A pause or an approval wait, as durable workflow operations: a recorded step fixes its start
 * (so the deadline survives restarts), a durable wait for a command or the deadline, and a
 * recorded step marks its end. Resolves to go on; throws {@link RolloutStopped} on an abort or a
 * timed-out approval. A `promote --full` received ends it too, except an approval that names its
 * `approvers`: that one ends once `count` distinct approvers approved (each approve, or plain
 * promote, read from the inbox is checkpointed by DBOS, so approvals survive a restart).
 */
export async function runGate(
  host: RolloutHost,
  rec: RolloutRecorder,
  inbox: CommandInbox,
  name: string,
  label: string,
  kind: "pause" | "approval",
  durationMs: number | undefined,
  approvers?: ApproversSettings,
): Promise<void> {
  const seq = 6;
  const since = await DBOS.runStep(
    async () => {
      faultPoint(name, "before");
      await host.store.stepStarted(host.id, seq, name);
      return Date.now();
    },
    { name },
  );
  const until = durationMs === undefined ? null : since + durationMs;
  const untilText = until === null ? null : new Date(until).toISOString();
  const requirement = kind === "approval" ? requirementOf(approvers) : null;
  rec.state.approvals ??= [];
  const approved = (): ApprovalRecord[] => approvalsAt(rec.state.approvals, name);
  const hint = () =>
    requirement
      ? approvalHint(host.id, requirement, approved(), untilText)
      : untilText
        ? `paused until ${untilText}: manent promote ${host.id} to go on now`
        : `paused until promoted: manent promote ${host.id}`;
  rec.state.waiting = {
    kind,
    step: name,
    since: new Date(since).toISOString(),
    until: untilText,
    hint: hint(),
    approvers: requirement,
  };
  await rec.save();
  faultPoint(name, "after");

  let outcome = await inbox.wait(kind, until, name, !requirement?.explicit);
  while (requirement && outcome.ended === "command" && outcome.message.command !== "abort" && !outcome.message.full) {
    // An approve, or a plain promote (which counts as its sender's approval), checked by the server when sent.
    const m = outcome.message;
    const byId = m.by_id ?? (m.by ? `token:${m.by}` : "anonymous");
    if (!approved().some((a) => a.by_id === byId)) {
      const command = m.command === "promote" ? "promote" : "approve";
      rec.state.approvals.push({
        step: name,
        by: m.by ?? byId,
        by_id: byId,
        at: m.at ?? new Date(await DBOS.now()).toISOString(),
        command,
      });
    }
    if (approved().length >= requirement.count) break;
    rec.state.waiting.hint = hint();
    await rec.save();
    faultPoint(name, "approved");
    outcome = await inbox.wait(kind, until, name, !requirement.explicit);
  }
  rec.state.waiting = null;
  const counted = approved();
  const stop =
    outcome.ended === "background"
      ? backgroundStopped(outcome.reason, label)
      : outcome.ended === "command" && outcome.message.command === "abort"
        ? abortedBy(outcome.message, label)
        : outcome.ended === "timeout" && kind === "approval"
          ? new RolloutStopped(
              Code.DeadlineExceeded,
              counted.length > 0
                ? `${label}: ${counted.length} of ${requirement!.count} approvals within ${formatMs(durationMs!)}`
                : `${label}: nobody approved within ${formatMs(durationMs!)}`,
            )
          : undefined;
  const endedBy =
    outcome.ended === "background"
      ? "background analysis failed"
      : outcome.ended === "timeout"
        ? kind === "pause"
          ? "pause over"
          : counted.length > 0
            ? `timed out with ${counted.length} of ${requirement!.count} approvals (${counted.map((a) => a.by).join(", ")})`
            : "timed out"
        : outcome.message.command === "abort" || outcome.message.full || !requirement
          ? commandText(outcome.message)
          : counted.map((a) => `${a.command} by ${a.by}`).join(", ");
  await endGate(host, rec, name, endedBy, stop);
}

/** A command as a step's `ended_by` names it: "promote --full by alice". */
export function commandText(m: CommandMessage): string {
  return `${m.command}${m.full ? " --full" : ""}${m.by ? ` by ${m.by}` : ""}`;
}

/** Ends a waiting step: its outcome checkpointed, the rollout state saved, and `stop` thrown when the wait stopped the rollout. */
export async function endGate(
  host: RolloutHost,
  rec: RolloutRecorder,
  name: string,
  endedBy: string,
  stop: RolloutStopped | undefined,
): Promise<void> {
  await DBOS.runStep(
    async () => {
      await host.store.stepFinished(host.id, name, stop ? "failed" : "succeeded", { ended_by: endedBy }, stop?.toJSON());
    },
    { name: `${name}:end` },
  );
  await rec.save();
  faultPoint(name, "checkpointed");
  if (stop) throw stop;
}
