import type { Readable } from "node:stream";
import { formatBytes } from "../config/format-bytes.js";
import { Code, ManentError } from "../errors.js";

export interface UploadResult {
  sha256: string;
  size: number;
  /** False when the same bytes were already uploaded by this tenant (nothing was written). */
  created: boolean;
}

/** What one upload may take: its own size limit, and the tenant's quota (with the manent.yml field that sets it). */
export interface UploadLimits {
  maxSize: number;
  quota?: { bytes: number; field: string };
  /** The size the client declared (Content-Length), so a body over the quota is refused before it is read. */
  declaredSize?: number;
}

/** One of a tenant's uploads, as listed. */
export interface UploadEntry {
  sha256: string;
  size: number;
  created_at: string;
  /** When a submission last named it (the retention's min_age counts from the later of the two). */
  last_used_at: string | null;
}

/** The submission that names an upload: the deploy it records (or the release). */
export interface UploadClaimant {
  id: string;
  application: string;
  artifact: string;
  environment: string;
  version: string;
}

/**
 * A tenant's uploaded artifacts, content-addressed by sha256. Storing is idempotent and keeps a
 * body only when its sha256 is the one the client named, its size is within the limit and the
 * tenant's total within its quota. Every server of a fleet reads the same uploads, whichever
 * received them.
 */
export interface UploadStore {
  /** The upload's size, or undefined when this tenant has no such upload. */
  size(tenant: string, sha256: string): Promise<number | undefined>;
  /**
   * The upload's size, recording that a submission names it now (so a retention sweep running
   * meanwhile leaves it), or undefined when this tenant has no such upload. With `by`, the
   * submission's claim is kept until its deploy (or release) is recorded: a deletion meanwhile is refused.
   */
  claim(tenant: string, sha256: string, by?: UploadClaimant): Promise<number | undefined>;
  /**
   * Runs `fn` (which queues the submission's workflow) with the upload claimed by `by` and no
   * deletion of the tenant's uploads running: the claim is committed first, so a deletion after
   * `fn` finds it. An upload removed since the submission was checked is `invalid_argument`.
   */
  whileClaimed<T>(tenant: string, sha256: string, by: UploadClaimant, fn: () => Promise<T>): Promise<T>;
  /** Releases the claims of a submission refused before its workflow was queued. */
  unclaim(id: string): Promise<void>;
  put(tenant: string, sha256: string, body: Readable, limits: UploadLimits, signal?: AbortSignal): Promise<UploadResult>;
  /** The upload's bytes, or undefined when this tenant has no such upload. */
  open(tenant: string, sha256: string): Promise<Readable | undefined>;
}

export function tooLarge(maxSize: number): ManentError {
  return new ManentError(Code.InvalidArgument, `upload: larger than ${maxSize} bytes (artifacts.max_upload_size in manent.yml)`, {
    details: { field: "body" },
  });
}

/** An upload that would take its tenant over its quota: `resource_exhausted` (HTTP 413) naming the quota and the use. */
export function overQuota(tenant: string, quota: { bytes: number; field: string }, used: number, size: number): ManentError {
  return new ManentError(
    Code.ResourceExhausted,
    `upload: tenant ${tenant} would go over its upload quota of ${formatBytes(quota.bytes)} (${quota.field} in manent.yml): ` +
      `${formatBytes(used)} stored, this upload ${formatBytes(size)}; remove uploads no deploy needs (manent uploads list, manent uploads rm) or ask for a larger quota`,
    { details: { field: "body", quota_bytes: String(quota.bytes), used_bytes: String(used), size_bytes: String(size) } },
  );
}

export function hashMismatch(actual: string, named: string): ManentError {
  return new ManentError(Code.InvalidArgument, `upload: the body's sha256 is ${actual}, not ${named} as the request named it`, {
    details: { field: "sha256" },
  });
}
