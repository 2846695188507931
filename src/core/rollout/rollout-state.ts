/**
 * What a rollout looks like to users, kept on the deploy record (`rollout` in the API and in
 * `-o json`) and rewritten at every transition, so status, metrics and event streams read one place.
 */

export type WaveStatus = "pending" | "running" | "succeeded" | "failed" | "rolled_back" | "skipped";

export interface WaveState {
  /** 1-based. */
  index: number;
  /** "region=eu-west az=a", or "all targets". */
  name: string;
  labels: Record<string, string>;
  /** The wave's targets, by identity (targetId: the envconfig name, else the host). */
  hosts: string[];
  status: WaveStatus;
}

export type CanaryPhase = "preparing" | "deploying_candidate" | "stepping" | "promoting" | "promoted" | "reverting" | "reverted";

export interface CanaryState {
  /** The wave the canary runs in (null without waves). */
  wave: number | null;
  /** The steps, as the envconfig lists them ("set_weight 10", "pause 5m", ...). */
  steps: string[];
  /** 1-based index of the current step; 0 before the first, steps.length + 1 once stepping is over. */
  step: number;
  phase: CanaryPhase;
  /** The candidate's traffic weight (percent). */
  weight: number;
  /** What PrepareSlots returned; passed to every later call as `Request.traffic`. */
  traffic: Record<string, string> | null;
  /** What RouteTesters returned: how testers reach the candidate. */
  testers: Record<string, string> | null;
}

/** What the rollout waits for, and how a user goes on. */
export interface WaitingState {
  kind: "pause" | "approval" | "webhook";
  /** The step or gate name, e.g. "canary-2:pause" or "wave-1:gate-1:approval". */
  step: string;
  since: string;
  /** When the pause ends or the approval times out; null for "until promoted" / no timeout. */
  until: string | null;
  /** "waiting for approval: manent approve <id>", with who is still awaited. */
  hint: string;
  /** An approval's requirements (null for a pause): who may approve and how many; its approvals so far are in `approvals`. */
  approvers?: ApproverRequirement | null;
}

/** Who must approve an approval step or gate (the envconfig's `approval.approvers`, defaults applied). */
export interface ApproverRequirement {
  /** Distinct approvers needed. */
  count: number;
  /** Groups an approver must be in; empty: anyone allowed to approve there. */
  from_groups: string[];
  /** Whether the deploy's submitter may approve. */
  allow_submitter: boolean;
  /** True when the envconfig set `approvers` (such an approval is never skipped by `promote --full`). */
  explicit: boolean;
}

/** One counted approval: who (name and principal id), when, at which step, and with which command. */
export interface ApprovalRecord {
  step: string;
  by: string;
  by_id: string;
  at: string;
  command: "approve" | "promote";
}

export interface MeasurementRecord {
  /** The analysis step or gate it belongs to. */
  step: string;
  check: string;
  at: string;
  value: number | string | null;
  verdict: "successful" | "failed" | "inconclusive";
  message: string;
}

export type CommandName = "approve" | "promote" | "abort";

export interface CommandRecord {
  command: CommandName;
  /** promote only: skip every remaining step. */
  full: boolean;
  by: string | null;
  at: string;
  /** What the rollout was doing when the command arrived. */
  during: string | null;
}

export interface RolloutState {
  waves: WaveState[];
  /** 1-based index of the wave running (or that ended the rollout); null before the first. */
  current_wave: number | null;
  canary: CanaryState | null;
  waiting: WaitingState | null;
  measurements: MeasurementRecord[];
  /** Every counted approval, in order (absent on deploys recorded before approvals were kept). */
  approvals?: ApprovalRecord[];
  /** The background analysis (absent without `rollout.background_analysis`). */
  background?: BackgroundState;
  /** Set when the rollout ended early: which step and why. */
  message: string | null;
}

/** One check of the background analysis: its counts since the analysis (re)started, and its last measurement. */
export interface BackgroundCheckState {
  check: string;
  measured: number;
  failed: number;
  inconclusive: number;
  last: Omit<MeasurementRecord, "step" | "check"> | null;
}

/**
 * The background analysis: `pending` before its starting step, `running` while measured, `stopped`
 * once its canary was promoted (or the rollout ended), `failed` when a check failed (the rollout
 * was aborted: `message` says which check and its value).
 */
export interface BackgroundState {
  status: "pending" | "running" | "stopped" | "failed";
  /** When it (last) started; null before. */
  since: string | null;
  /** The canary step from which it runs (1-based), or null when it spans the waves from their start. */
  starting_step: number | null;
  checks: BackgroundCheckState[];
  message: string | null;
}

/** The rollout as the API shows it: the state plus the operator commands recorded on the deploy. */
export interface RolloutView extends RolloutState {
  commands: CommandRecord[];
}
