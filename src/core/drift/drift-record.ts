import type { DriftChange, IgnoredChange } from "../contract/index.js";
import type { ScopePattern } from "../identity/index.js";
import type { EnvconfigOrigin } from "../config/index.js";
import type { EnvconfigComparison } from "./envconfig-change.js";
import type { DeployKey } from "../engine/deploy-store.js";

/**
 * What manent records of one target's drift, one row per target identity of an application's
 * environment. `unknown`: the plugin cannot tell (it has no drift call, or said so, `reason` why);
 * `error`: the check failed (`reason` is the error).
 */
export type DriftState = "in_sync" | "drifted" | "unknown" | "error";

export interface TargetDriftRecord extends DeployKey {
  /** The target's identity (its envconfig name, else its host). */
  target: string;
  state: DriftState;
  /** The deploy whose release the target was compared with. */
  deploy_id: string;
  plugin: string;
  /** The recorded release (the last succeeded deploy's version). */
  expected_version: string;
  /** What the target runs now, as the plugin tells it ("" when unknown or none). */
  live_version: string;
  changes: DriftChange[];
  /** Differences that are not drift (the envconfig's `drift.ignore`, an autoscaler's replicas), each with why. */
  ignored: IgnoredChange[];
  reason: string | null;
  checked_at: string;
  /** When the state or the changes last changed (the first check, a new drift, a heal). */
  changed_at: string;
}

/** One check of an application's environment: every target's record. */
export interface DriftReport extends DeployKey {
  deploy_id: string;
  plugin: string;
  expected_version: string;
  targets: TargetDriftRecord[];
  /** The deploy submitted to heal the drift, when the envconfig asks for it and one was. */
  heal_deploy_id?: string;
  /** On demand only: the envconfig change a new deploy would bring (see envconfig-change.ts). */
  envconfig?: EnvconfigComparison;
}

export interface DriftFilter {
  scopes?: readonly ScopePattern[];
  tenant?: string;
  application?: string;
  environment?: string;
  artifact?: string;
}

/** The release a drift check compares with: the last succeeded deploy or rollback of a key. */
export interface RecordedRelease extends DeployKey {
  deploy_id: string;
  kind: "deploy" | "rollback";
  version: string;
  request: Record<string, unknown>;
  /** The artifact the release's deploy fetched (source, sha256), when a deploy of that version recorded one. */
  fetched?: { source: string; sha256?: string };
  /** Where the release's envconfig came from (absent: recorded before manent kept it). */
  envconfig?: EnvconfigOrigin;
  /** The latest deploy of the key (any kind but dry-run), its status (a check waits while one runs) and envconfig. */
  latest: { id: string; status: string; envconfig?: EnvconfigOrigin };
}

export interface DriftStore {
  /** Replaces the key's records with this check's; returns the targets whose state or changes differ from before. */
  saveCheck(report: Omit<DriftReport, "heal_deploy_id">): Promise<TargetDriftRecord[]>;
  list(filter: DriftFilter): Promise<TargetDriftRecord[]>;
  /** The keys with a succeeded deploy (the releases a periodic check may compare with). */
  recordedReleases(): Promise<RecordedRelease[]>;
  /** The same, for the keys of these deploys only. */
  recordedReleasesOf(deployIds: readonly string[]): Promise<RecordedRelease[]>;
  recordedRelease(key: DeployKey): Promise<RecordedRelease | undefined>;
  /**
   * Claims the key's periodic check when it is due: true for exactly one caller per interval across
   * every server sharing the database (the due time is kept in Postgres, so a restart keeps it).
   */
  claimCheck(key: DeployKey, intervalMs: number): Promise<boolean>;
  /** Drifted targets per tenant, application and environment, for the metric. */
  driftedCounts(): Promise<{ tenant: string; application: string; environment: string; drifted: number }[]>;
}
