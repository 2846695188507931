import type { Readable } from "node:stream";
import { Code, ManentError } from "../errors.js";

export interface UploadResult {
  sha256: string;
  size: number;
  /** False when the same bytes were already uploaded by this tenant (nothing was written). */
  created: boolean;
}

/**
 * A tenant's uploaded artifacts, content-addressed by sha256. Storing is idempotent and keeps a
 * body only when its sha256 is the one the client named and its size is within the limit. Every
 * server of a fleet reads the same uploads, whichever received them.
 */
export interface UploadStore {
  /** The upload's size, or undefined when this tenant has no such upload. */
  size(tenant: string, sha256: string): Promise<number | undefined>;
  put(tenant: string, sha256: string, body: Readable, maxSize: number, signal?: AbortSignal): Promise<UploadResult>;
  /** The upload's bytes, or undefined when this tenant has no such upload. */
  open(tenant: string, sha256: string): Promise<Readable | undefined>;
}

export function tooLarge(maxSize: number): ManentError {
  return new ManentError(Code.InvalidArgument, `upload: larger than ${maxSize} bytes (artifacts.max_upload_size in manent.yml)`, {
    details: { field: "body" },
  });
}

export function hashMismatch(actual: string, named: string): ManentError {
  return new ManentError(Code.InvalidArgument, `upload: the body's sha256 is ${actual}, not ${named} as the request named it`, {
    details: { field: "sha256" },
  });
}
