import type { Readable } from "node:stream";
import { tooLarge, type UploadResult, type UploadStore } from "../core/artifacts/upload-store.js";
import { Code, ManentError } from "../core/errors.js";
import { authorize, type Caller } from "./auth.js";

export const sha256Pattern = /^[0-9a-f]{64}$/;
export const tenantPattern = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

/** What the upload routes need: where uploads go and how large one may be. */
export interface UploadDeps {
  store: UploadStore;
  maxSize: number;
}

/** The tenant an upload belongs to: the one named, else the caller's own, else "untenanted". */
export function uploadTenant(caller: Caller, named: string | undefined): string {
  const tenant = named ?? (caller.tenant === "*" ? "untenanted" : caller.tenant);
  if (tenant.length > 63 || !tenantPattern.test(tenant)) {
    throw new ManentError(Code.InvalidArgument, "query: tenant: must be lower-case letters, digits, '.', '_' or '-' (at most 63)", {
      details: { field: "tenant" },
    });
  }
  authorize(caller, tenant);
  return tenant;
}

/** Stores an uploaded body; a declared length over the limit is refused before a byte is read. */
export async function receiveUpload(
  deps: UploadDeps,
  tenant: string,
  sha256: string,
  body: Readable,
  contentLength: string | undefined,
): Promise<UploadResult> {
  if (!sha256Pattern.test(sha256)) {
    throw new ManentError(Code.InvalidArgument, "path: sha256: must be 64 lower-case hex digits (the sha256 of the body)", {
      details: { field: "sha256" },
    });
  }
  if (contentLength !== undefined && Number(contentLength) > deps.maxSize) throw tooLarge(deps.maxSize);
  return deps.store.put(tenant, sha256, body, deps.maxSize);
}

/** An upload's size, or `not_found`. */
export async function describeUpload(deps: UploadDeps, tenant: string, sha256: string): Promise<{ sha256: string; size: number }> {
  if (!sha256Pattern.test(sha256)) {
    throw new ManentError(Code.InvalidArgument, "path: sha256: must be 64 lower-case hex digits", { details: { field: "sha256" } });
  }
  const size = await deps.store.size(tenant, sha256);
  if (size === undefined) throw new ManentError(Code.NotFound, `no upload ${sha256} for tenant ${tenant}`);
  return { sha256, size };
}
