import type { Readable } from "node:stream";
import { tooLarge, type UploadResult, type UploadStore } from "../core/artifacts/upload-store.js";
import { Code, ManentError } from "../core/errors.js";
import { canSomewhereIn, rolesAllowing, type Action, type Principal } from "../core/identity/index.js";
import { onlyTenant } from "./identity/index.js";

export const sha256Pattern = /^[0-9a-f]{64}$/;
export const tenantPattern = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

/** What the upload routes need: where uploads go and how large one may be. */
export interface UploadDeps {
  store: UploadStore;
  maxSize: number;
}

/**
 * The tenant an upload belongs to: the one named, else the one tenant of the caller's grants, else
 * "untenanted". Uploads are per tenant, not per application: storing one takes `submit` or `dry_run`
 * somewhere in the tenant, asking about one `read` there.
 */
export function uploadTenant(caller: Principal, named: string | undefined, use: "store" | "read"): string {
  const tenant = named ?? onlyTenant(caller) ?? "untenanted";
  if (tenant.length > 63 || !tenantPattern.test(tenant)) {
    throw new ManentError(Code.InvalidArgument, "query: tenant: must be lower-case letters, digits, '.', '_' or '-' (at most 63)", {
      details: { field: "tenant" },
    });
  }
  const needs: Action[] = use === "store" ? ["submit", "dry_run"] : ["read"];
  if (!needs.some((action) => canSomewhereIn(caller, action, tenant))) {
    const roles = [...new Set(needs.flatMap(rolesAllowing))];
    throw new ManentError(
      Code.PermissionDenied,
      `${caller.name} may not ${use === "store" ? "upload artifacts to" : "read the uploads of"} tenant ${tenant}: needs the ${needs.join(" or ")} permission somewhere in it (role ${roles.join(" or ")})`,
      { details: { action: needs[0]!, tenant } },
    );
  }
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
