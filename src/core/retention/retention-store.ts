import type { Keep } from "../config/retention-config.js";
import type { DeployKey } from "../engine/deploy-store.js";

/** An audit entry as the database keeps it (every column), exported before it is deleted. */
export type AuditRow = Record<string, unknown> & { id: string };

/** Where retention finds what it may delete, and deletes it (storage/pg-retention.ts). */
export interface RetentionStore {
  /** Takes (or renews) a lease that one holder has at a time until it expires: one server of a fleet sweeps. */
  takeLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  releaseLease(name: string, holder: string): Promise<void>;
  /** The deploy keys that have ended deploys, with how many. */
  deployKeys(): Promise<(DeployKey & { ended: number })[]>;
  deployCandidates(key: DeployKey, keep: Keep, versionsKept: number, limit: number): Promise<string[]>;
  deleteDeploys(ids: string[]): Promise<void>;
  releaseKeys(): Promise<{ tenant: string; application: string; ended: number }[]>;
  releaseCandidates(key: { tenant: string; application: string }, keep: Keep, limit: number): Promise<string[]>;
  deleteReleases(ids: string[]): Promise<void>;
  auditBefore(cutoffMs: number, limit: number): Promise<AuditRow[]>;
  deleteAudit(ids: string[]): Promise<number>;
}
