/**
 * Separation of duties at an approval step or gate: who may approve (groups, the submitter or
 * not), how many distinct people must, and what a user is told while approvals are awaited.
 *
 * The server checks an approver when the approve (or the promote that counts as one) arrives, and
 * refuses it with the requirement it misses; the workflow counts each principal id once and ends
 * the wait at `count`. Principal ids (`user:<sub>`, `token:<name>`), never display names, tell
 * people apart.
 */
import { Code, ManentError } from "../errors.js";
import type { Principal } from "../identity/index.js";
import type { ApproversSettings } from "./rollout-config.js";
import type { ApprovalRecord, ApproverRequirement, WaitingState } from "./rollout-state.js";

/** Who sends a command, as far as approvals are concerned. */
export type Actor = Pick<Principal, "id" | "name" | "groups">;

/** The requirement of an approval: the envconfig's `approvers` with defaults, or today's "anyone, once". */
export function requirementOf(a: ApproversSettings | undefined): ApproverRequirement {
  return {
    count: a?.count ?? 1,
    from_groups: a?.from_groups ?? [],
    allow_submitter: a?.allow_submitter ?? true,
    explicit: a !== undefined,
  };
}

/**
 * The principal id of a deploy's submitter. Deploys recorded before ids were kept name only the
 * token that submitted them (people could not sign in then), whose id is `token:<name>`.
 */
export function submitterIdOf(d: { submitted_by: string | null; submitted_by_id?: string | null }): string | null {
  if (d.submitted_by_id) return d.submitted_by_id;
  if (!d.submitted_by) return null;
  return d.submitted_by === "anonymous" ? "anonymous" : `token:${d.submitted_by}`;
}

/** The approvals counted so far at `step`. */
export function approvalsAt(approvals: readonly ApprovalRecord[] | undefined, step: string): ApprovalRecord[] {
  return (approvals ?? []).filter((a) => a.step === step);
}

/**
 * Throws unless `actor` may give one more approval to the approval the deploy waits at:
 * `permission_denied` (403) naming the requirement it misses (`from_groups`, `allow_submitter`),
 * `already_exists` (409) when it has approved this step already (each person counts once).
 */
export function checkApprover(
  deploy: { id: string; submitted_by: string | null; submitted_by_id?: string | null },
  waiting: WaitingState,
  approvals: readonly ApprovalRecord[] | undefined,
  actor: Actor,
  command: "approve" | "promote",
  /** What is approved, for messages. */
  what = "deploy",
): void {
  const req = waiting.approvers ?? requirementOf(undefined);
  const at = `the approval at ${waiting.step}`;
  const refuse = (requirement: string, why: string) =>
    new ManentError(Code.PermissionDenied, `${actor.name} may not approve ${what} ${deploy.id}: ${why}`, {
      details: { requirement, step: waiting.step, ...(command === "promote" && { command }) },
    });
  if (req.from_groups.length > 0 && !req.from_groups.some((g) => actor.groups.includes(g))) {
    const groups = req.from_groups.join(", ");
    throw refuse(
      "from_groups",
      `${at} needs approvers from ${req.from_groups.length === 1 ? "the group" : "one of the groups"} ${groups} (approvers.from_groups), and ${actor.name} is in none of them`,
    );
  }
  if (!req.allow_submitter && submitterIdOf(deploy) === actor.id) {
    throw refuse("allow_submitter", `${actor.name} submitted it, and ${at} refuses the submitter (approvers.allow_submitter: false)`);
  }
  const mine = approvalsAt(approvals, waiting.step).find((a) => a.by_id === actor.id);
  if (mine) {
    throw new ManentError(
      Code.AlreadyExists,
      `${actor.name} already approved ${waiting.step} of ${what} ${deploy.id} at ${mine.at}; each approver counts once (${awaitedText(req, approvalsAt(approvals, waiting.step))})`,
      { details: { step: waiting.step } },
    );
  }
}

/** "1 of 2 approvals from release-managers; the submitter may not approve" (empty for today's plain approval). */
export function awaitedText(req: ApproverRequirement, approvals: readonly ApprovalRecord[]): string {
  if (!req.explicit) return "";
  const from = req.from_groups.length ? ` from ${req.from_groups.join(" or ")}` : "";
  const parts = [`${approvals.length} of ${req.count} approval${req.count === 1 ? "" : "s"}${from}`];
  if (approvals.length > 0) parts.push(`approved by ${approvals.map((a) => a.by).join(", ")}`);
  if (!req.allow_submitter) parts.push("the submitter may not approve");
  return parts.join("; ");
}

/** The hint of an approval wait: the command, who is still awaited, and when it times out. */
export function approvalHint(id: string, req: ApproverRequirement, approvals: readonly ApprovalRecord[], until: string | null): string {
  const notes = [awaitedText(req, approvals), until && `aborts at ${until}`].filter(Boolean);
  return `waiting for approval: manent approve ${id}${notes.length ? ` (${notes.join("; ")})` : ""}`;
}
