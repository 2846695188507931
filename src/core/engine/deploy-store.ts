import type { Capability, TargetResult } from "../contract/index.js";
import type { EnvconfigOrigin } from "../config/index.js";
import type { ErrorJSON } from "../errors.js";
import type { NewAuditEntry, ScopePattern } from "../identity/index.js";
import type { ArtifactVerification } from "../verification/verification-result.js";
import type { CommandRecord, RolloutState, RolloutView } from "../rollout/rollout-state.js";

export type DeployKind = "deploy" | "dry_run" | "rollback";
export type DeployStatus = "queued" | "running" | "succeeded" | "failed" | "rolled_back" | "cancelled";
export const terminalStatuses: ReadonlySet<DeployStatus> = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);
export type StepStatus = "running" | "succeeded" | "failed" | "skipped";

export interface DeployKey {
  tenant: string;
  application: string;
  artifact: string;
  environment: string;
}

export interface NewDeploy extends DeployKey {
  id: string;
  kind: DeployKind;
  version: string;
  /** What was submitted (descriptor, overrides, file names); never secret values. */
  request: Record<string, unknown>;
  /** Who submitted it: a name to show, and the principal id (`user:<sub>`, `token:<name>`) separation of duties compares. */
  submittedBy?: string;
  submittedById?: string;
  /** The deploy this one retries (`manent retry`). */
  retryOf?: string;
  /** Where the envconfig it runs came from (resolved once, at submission). */
  envconfig?: EnvconfigOrigin;
}

export interface StepRecord {
  name: string;
  status: StepStatus;
  attempts: number;
  started_at: string | null;
  duration_ms: number | null;
  /** `result` is a JSON string, so `jq '.output.result | fromjson'` works. */
  output: { result: string } | null;
  error: ErrorJSON | null;
}

export interface TargetProgress {
  phase: string;
  host: string;
  status: string;
  duration_ms: number | null;
  error: string | null;
  details: Record<string, string> | null;
}

/** What a queued deploy waits for before it starts, as its record and the `deploy.waiting` event show it. */
export interface DeployWaiting {
  /** `deploy_window`: held back by a deploy window or a freeze (deploy_windows in manent.yml). */
  kind: "deploy_window";
  since: string;
  /** When it may run; null when no opening is found within a year. */
  until: string | null;
  /** The rule that keeps it out: `deny window NAME`, `freeze NAME: REASON`, `outside allow window NAME`. */
  rule: string;
  /** One line for people: `waiting for deploy window until <time> (<rule>)`. */
  hint: string;
}

export interface DeployRecord extends DeployKey {
  id: string;
  kind: DeployKind;
  version: string;
  plugin: string | null;
  status: DeployStatus;
  request: Record<string, unknown>;
  error: ErrorJSON | null;
  submitted_by: string | null;
  /** The submitter's principal id (`user:<sub>`, `token:<name>`, `anonymous`); null for deploys from before it was recorded. */
  submitted_by_id: string | null;
  /** The deploy this one retries (`manent retry`), if it is a retry. */
  retry_of: string | null;
  /** Where the envconfig it runs came from; null when none was found, or for deploys recorded before it was kept. */
  envconfig: EnvconfigOrigin | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  steps: StepRecord[];
  targets: TargetProgress[];
  /** The retries of this deploy, oldest first. */
  retried_by: string[];
  /** Waves and canary of a deploy with rollout settings; null otherwise. */
  rollout: RolloutView | null;
  /** What verified its artifact under manent.yml's verification policies (its fetch step's output); null when no policy wanted a signature or it was not fetched. */
  verification: ArtifactVerification[] | null;
  /** What the deploy waits for before it starts (a deploy window); null when nothing (set by getDeploy). */
  waiting?: DeployWaiting | null;
}

export interface ListFilter {
  /** Only deploys within one of these scopes (what the caller may read); absent: all. */
  scopes?: readonly ScopePattern[];
  tenant?: string;
  application?: string;
  environment?: string;
  artifact?: string;
  status?: DeployStatus;
  limit?: number;
}

/** Where a deploy stood when a user asked to cancel it, and whether the cancel was taken. */
export interface CancelState {
  accepted: boolean;
  /** The record's status before the cancel. */
  previous: DeployStatus;
  kind: DeployKind;
  version: string;
  /** The deploy step has started (its gate passed). */
  deploying: boolean;
  /** The deploy step has finished and the deploy is committed to its new release. */
  committed: boolean;
  /** Why the deploy would not be rolled back, when it would not (set when its deploy step starts). */
  no_rollback_reason: string | null;
}

/** What `startRun` found: the deploy's status once it is marked running (or had ended), or the deploy it waits for. */
export type RunStart =
  | {
      status: DeployStatus | undefined;
      behind?: undefined;
      /** How long it was queued, from its submission to its start (when it starts now or had started). */
      queuedMs?: number | undefined;
    }
  | { behind: string };

/**
 * Who runs a step: the DBOS workflow and the ownership token of this execution of it (DBOS's
 * `owner_xid`). A step is recorded only while the token still owns the workflow, as DBOS records
 * its own steps: a second copy of the workflow (recovered on another server) stops at its next step.
 */
export interface StepOwner {
  workflowId: string;
  token: string;
}

/** What a step's record says as an attempt of it is about to run (see step-runner.ts). */
export type StepBegin =
  /** Run it: this attempt's number, the token its end is recorded with. */
  | { run: true; attempt: number }
  /** Ended in an earlier run of the workflow (its checkpoint): return its output or throw its error, do not run it. */
  | {
      run: false;
      reason: "checkpointed";
      status: "succeeded" | "failed";
      /** The failure was the last of its retries. */
      exhausted: boolean;
      attempts: number;
      output: unknown;
      error: ErrorJSON | null;
    }
  /** A user's cancel is recorded (asked for with `unlessCancelled`): nothing was written. */
  | { run: false; reason: "user_cancel" }
  /** DBOS cancelled the workflow, or another execution owns it now: this one stops. */
  | { run: false; reason: "workflow_cancelled" | "not_owner" };

/** How an attempt of a step ended; `final` makes it the step's checkpoint. */
export interface StepEnd {
  status: "succeeded" | "failed";
  output: unknown;
  error?: ErrorJSON;
  /** The step's outcome (no attempt follows); `exhausted` when a failure is the last of its retries. */
  final: false | "ended" | "exhausted";
}

/**
 * A write that may wait for the deploy's next statement and be committed with it, in one
 * transaction (or on its own after a few milliseconds if none comes): one commit, one WAL flush,
 * for a step's end and the next step's start. A crash before that commit loses it, as a crash
 * just before the write would have.
 */
export interface WriteHold {
  /** The error the deploy's next statement throws if the write, committed, changed nothing (another execution took the step over). */
  lost: () => Error;
  /** Called once the write is committed. */
  committed?: () => void;
}

/** Where deploy records live. Every write is idempotent: a step may run again after a crash. */
export interface DeployStore {
  /** `audit`: the submission's entry in the audit log, committed with the record (one commit, not two). */
  createDeploy(deploy: NewDeploy, audit?: NewAuditEntry): Promise<void>;
  /**
   * Records a deploy its submission just queued on DBOS's queue `queue`, partition `partition`, and
   * answers, in the same statement, the deploy it waits for there: the latest one queued before it,
   * else the one running; none when it is no longer queued or was queued in the same millisecond as
   * the one before it (their order is not known). `audit` as in `createDeploy`: written even when
   * the workflow recorded the deploy first.
   */
  createQueuedDeploy(deploy: NewDeploy, queue: string, partition: string, audit?: NewAuditEntry): Promise<{ behind?: string }>;
  setStatus(id: string, status: DeployStatus, extra?: { error?: ErrorJSON | null; plugin?: string }): Promise<void>;
  /**
   * Records an attempt of a step as running. With `unlessCancelled`, in the same statement, nothing is
   * written and false returned when a user's cancel has been recorded (one round trip, not two).
   */
  stepStarted(id: string, seq: number, name: string, opts?: { unlessCancelled?: boolean }): Promise<boolean>;
  stepFinished(id: string, name: string, status: StepStatus, output: unknown, error?: ErrorJSON): Promise<void>;
  /**
   * Starts an attempt of a checkpointed step (step-runner.ts) in one statement: unless the step has
   * a checkpoint already (then that), the workflow is cancelled or not owned by `owner`, or (with
   * `unlessCancelled`) a user's cancel is recorded. The step record is the step's checkpoint.
   */
  beginStep(id: string, seq: number, name: string, opts: { unlessCancelled: boolean; owner?: StepOwner | undefined }): Promise<StepBegin>;
  /**
   * Records the end of attempt `attempt` (with its result and its event, in one statement), only
   * while that attempt is the step's latest, the step has no checkpoint and `owner` owns the
   * workflow: false otherwise (another execution took the step over). With `hold`, the write waits
   * for the deploy's next statement (see {@link WriteHold}) and true is returned at once.
   */
  endStep(id: string, name: string, attempt: number, end: StepEnd, owner?: StepOwner | undefined, hold?: WriteHold): Promise<boolean>;
  /** Records several targets' results of a phase in one write (see target-recorder.ts). */
  recordTargets(id: string, phase: string, results: TargetResult[]): Promise<void>;
  /** Commits every held write now (before the process stops). */
  flushHeld(): Promise<void>;
  /** The targets of a phase recorded as done (`deployed` or `unchanged`): a resumed step skips them (see target-resume.ts). */
  doneTargets(id: string, phase: string): Promise<TargetResult[]>;
  /**
   * Marks the deploy running, unless it ended already (cancelled while queued): then its status, and
   * nothing runs. With `record`, the deploy is created first if it is not yet. A deploy (not a dry
   * run) that another deploy of its key is running ahead of is left queued: `behind` names that one.
   * `plugin`, when the submission's resolve named it, is recorded with the start.
   */
  startRun(id: string, record?: NewDeploy, plugin?: string): Promise<RunStart>;
  /** Records a user's cancel unless the deploy has ended or is committed; a queued deploy is cancelled at once. */
  requestCancel(id: string, cancelledError: ErrorJSON): Promise<CancelState | undefined>;
  /** Which of `ids` have a user's cancel recorded: one read for all. */
  cancelsRequested(ids: string[]): Promise<Set<string>>;
  /** The gate before the deploy step: false when a cancel came first. */
  beginDeployStep(id: string, noRollbackReason: string | null): Promise<boolean>;
  /** The gate after the deploy step: false when a cancel came first. */
  commitDeployStep(id: string): Promise<boolean>;
  getDeploy(id: string): Promise<DeployRecord | undefined>;
  listDeploys(
    filter: ListFilter,
  ): Promise<Omit<DeployRecord, "steps" | "targets" | "request" | "rollout" | "retried_by" | "verification">[]>;
  /** The newest succeeded deploy (not dry-run) of a key, optionally older than a version. */
  lastSucceeded(key: DeployKey, exceptVersion?: string): Promise<{ id: string; version: string } | undefined>;
  saveCapabilities(plugin: string, capabilities: Capability[]): Promise<void>;
  /** Sets (or, with null, clears) what the deploy waits for before it starts. */
  setWaiting(id: string, waiting: DeployWaiting | null): Promise<void>;
  /**
   * Replaces the rollout state of a deploy (written at every transition of its waves and canary),
   * unless a later `revision` is stored: a resumed workflow replays its transitions with the same
   * revisions, and must not show a state older than the one it had reached.
   */
  saveRollout(id: string, rollout: RolloutState, revision: number): Promise<void>;
  /** Records an operator command (approve, promote, abort) with who sent it and when. */
  recordCommand(id: string, command: CommandRecord): Promise<void>;
  loadCapabilities(): Promise<Map<string, { capabilities: Capability[]; updated_at: string }>>;
}
