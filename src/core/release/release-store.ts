import type { Artifact } from "../contract/index.js";
import type { ErrorJSON } from "../errors.js";
import type { ScopePattern } from "../identity/index.js";
import type { ApprovalRecord, ApproverRequirement, MeasurementRecord } from "../rollout/rollout-state.js";
import type { Pipeline } from "./pipeline.js";

export type ReleaseStatus = "running" | "succeeded" | "failed" | "cancelled";
export const terminalReleaseStatuses: ReadonlySet<ReleaseStatus> = new Set(["succeeded", "failed", "cancelled"]);

/**
 * Where a stage stands. `pending`: not reached; `waiting`: at its manual promotion or approval;
 * `deploying`, `soaking`, `analysing`; then `succeeded` or `failed`; `cancelled` when the release
 * was cancelled there; `not_started` for the stages after a failure or a cancel (left untouched).
 */
export type StageStatus =
  "pending" | "waiting" | "deploying" | "soaking" | "analysing" | "succeeded" | "failed" | "cancelled" | "not_started";

export interface StageDeploy {
  environment: string;
  /** The deploy run for this environment (a child workflow of the release). */
  deploy_id: string;
  status: string;
}

export interface StageState {
  /** 1-based. */
  index: number;
  environments: string[];
  status: StageStatus;
  /** The deploys of this stage, once started. */
  deploys: StageDeploy[];
  /** Who promoted a manual stage, and when. */
  promoted_by: string | null;
  promoted_at: string | null;
  approvals: ApprovalRecord[];
  /** The soak's recorded start and end (the end survives restarts: a resumed soak waits only what remains). */
  soak_since: string | null;
  soak_until: string | null;
  measurements: MeasurementRecord[];
  started_at: string | null;
  finished_at: string | null;
  /** Why the stage failed or was cancelled. */
  message: string | null;
  /**
   * Set on the stages a retried release had already passed (`manent release retry`): the release
   * that deployed them. The retry does not deploy them again; its deploys, soak and approvals are that release's.
   */
  done_by?: string | null;
}

/** What a release waits for, and what a user does to go on. */
export interface ReleaseWaiting {
  kind: "promotion" | "approval" | "soak" | "analysis";
  /** 1-based stage index. */
  stage: number;
  environments: string[];
  since: string;
  /** When the soak ends or the approval times out; null for none. */
  until: string | null;
  /** "waiting for promotion: manent release promote ID --to staging". */
  hint: string;
  approvers: ApproverRequirement | null;
}

export interface NewRelease {
  id: string;
  tenant: string;
  application: string;
  /** The artifact as submitted (its sha256 once pinned: every stage deploys exactly these bytes). */
  artifact: Artifact;
  pipeline: Pipeline;
  pipeline_file: string;
  descriptor_file: string;
  submitted_by: string | null;
  submitted_by_id: string | null;
  /** Set on a retry (`manent release retry`): the release it retries, and the stages that release passed (not deployed again). */
  retry?: { of: string; done: StageState[] };
}

export interface ReleaseRecord {
  id: string;
  tenant: string;
  application: string;
  artifact: string;
  version: string;
  /** The sha256 every stage deploys; null until pinned (first step, for a source without one). */
  sha256: string | null;
  source: string;
  status: ReleaseStatus;
  pipeline: Pipeline;
  pipeline_file: string;
  environments: string[];
  /** 1-based index of the stage the release is at (or ended in); null before the first. */
  current_stage: number | null;
  stages: StageState[];
  waiting: ReleaseWaiting | null;
  error: ErrorJSON | null;
  submitted_by: string | null;
  submitted_by_id: string | null;
  cancel_requested_by: string | null;
  /** The release this one retries (`manent release retry`); null when it is not a retry. */
  retry_of: string | null;
  /** The retries of this release, oldest first. */
  retried_by: string[];
  created_at: string;
  finished_at: string | null;
}

export type ReleaseSummary = Omit<ReleaseRecord, "pipeline" | "stages" | "retried_by">;

/** What a release was started with beyond its record: the artifact as submitted (its type, its sha256 if given) and the descriptor's file name. */
export interface ReleaseSubmission {
  artifact: Artifact;
  descriptor_file: string;
}

export interface ReleaseListFilter {
  /** Only releases with an environment within one of these scopes (what the caller may read); absent: all. */
  scopes?: readonly ScopePattern[];
  tenant?: string;
  application?: string;
  status?: ReleaseStatus;
  limit?: number;
}

/** The progress of a release, written by its workflow at every transition: what the API, the CLI and the events read. */
export interface ReleaseProgress {
  status: ReleaseStatus;
  current_stage: number | null;
  stages: StageState[];
  waiting: ReleaseWaiting | null;
  error: ErrorJSON | null;
  sha256: string | null;
}

/** Where releases live. Every write is idempotent: a step may run again after a crash. */
export interface ReleaseStore {
  createRelease(r: NewRelease): Promise<void>;
  /**
   * Claims the one retry of release `of` for `id` (atomically: of concurrent claims one wins);
   * returns the retry that holds it, `id` or the one claimed before.
   */
  claimRetry(of: string, id: string): Promise<string>;
  /** Replaces the release's progress unless a later `revision` is stored (a resumed workflow replays its writes with the same revisions). */
  saveProgress(id: string, p: ReleaseProgress, revision: number): Promise<void>;
  /** Records a cancel request (who), unless the release has ended; false when it has. */
  requestCancel(id: string, by: string | null): Promise<boolean>;
  getRelease(id: string): Promise<ReleaseRecord | undefined>;
  /** What the release was started with (for its retry); undefined for an unknown release. */
  releaseSubmission(id: string): Promise<ReleaseSubmission | undefined>;
  listReleases(filter: ReleaseListFilter): Promise<ReleaseSummary[]>;
  /** The running releases waiting for a promotion, an approval, a soak or an analysis, with their stages (for the overview). */
  waitingReleases(filter: Omit<ReleaseListFilter, "status" | "limit">): Promise<ReleaseRecord[]>;
}
