import type { Readable } from "node:stream";
import { tooLarge, type UploadEntry, type UploadResult } from "../core/artifacts/upload-store.js";
import { uploadQuota, type UploadsConfig } from "../core/config/uploads-config.js";
import { Code, ManentError } from "../core/errors.js";
import { canSomewhereIn, rolesAllowing, type Action, type Principal } from "../core/identity/index.js";
import type { PgUploadStore } from "../storage/pg-upload-store.js";
import type { UploadNeed, UploadRetention } from "../storage/upload-retention.js";
import { onlyTenant } from "./identity/index.js";

export const sha256Pattern = /^[0-9a-f]{64}$/;
export const tenantPattern = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

/** What the upload routes need: where uploads go, how large one may be, the tenants' quotas and what deploys still need. */
export interface UploadDeps {
  store: PgUploadStore;
  maxSize: number;
  config: UploadsConfig;
  retention: UploadRetention;
}

/**
 * The tenant whose uploads a caller stores, deletes or sweeps: the one named, else the one tenant of
 * the caller's grants, else "untenanted". Uploads are per tenant, not per application. One it may
 * not read is not found (as a deploy it may not read), one it reads but may not submit or dry-run
 * in is refused (403).
 */
export function uploadTenantToChange(caller: Principal, named: string | undefined, notFound: (tenant: string) => string): string {
  return mayStore(caller, readableTenant(caller, named, notFound));
}

/**
 * The tenant a caller uploads to: the one it names (or its only one). A tenant it may not submit in
 * is refused as forbidden, naming where its grants are: the caller named the tenant itself (its
 * descriptor's), so saying it may not act there reveals nothing, and "not found" would read as bad
 * input.
 */
export function uploadTenant(caller: Principal, named: string | undefined): string {
  return mayStore(caller, tenantNamed(caller, named));
}

/** The tenant whose uploads a caller lists: one it may not read is not found. */
export function readableTenant(caller: Principal, named: string | undefined, notFound: (tenant: string) => string): string {
  const tenant = tenantNamed(caller, named);
  if (!canSomewhereIn(caller, "read", tenant)) throw new ManentError(Code.NotFound, notFound(tenant));
  return tenant;
}

function tenantNamed(caller: Principal, named: string | undefined): string {
  const tenant = named ?? onlyTenant(caller) ?? "untenanted";
  if (tenant.length > 63 || !tenantPattern.test(tenant)) {
    throw new ManentError(Code.InvalidArgument, "query: tenant: must be lower-case letters, digits, '.', '_' or '-' (at most 63)", {
      details: { field: "tenant" },
    });
  }
  return tenant;
}

function mayStore(caller: Principal, tenant: string): string {
  const needs: Action[] = ["submit", "dry_run"];
  if (!needs.some((action) => canSomewhereIn(caller, action, tenant))) {
    const roles = [...new Set(needs.flatMap(rolesAllowing))];
    throw new ManentError(
      Code.PermissionDenied,
      `${caller.name} may not upload artifacts to tenant ${tenant}: needs the ${needs.join(" or ")} permission somewhere in it (role ${roles.join(" or ")})` +
        grantedIn(caller),
      { details: { action: needs[0]!, tenant } },
    );
  }
  return tenant;
}

/** The tenant's quota and the manent.yml field that sets it, or undefined for none. */
export function quotaOf(config: UploadsConfig, tenant: string): { bytes: number; field: string } | undefined {
  const bytes = uploadQuota(config, tenant);
  if (bytes === undefined) return undefined;
  return { bytes, field: config.tenant_quotas[tenant] !== undefined ? `uploads.tenant_quotas.${tenant}` : "uploads.quota_per_tenant" };
}

function checkSha256(sha256: string): void {
  if (!sha256Pattern.test(sha256)) {
    throw new ManentError(Code.InvalidArgument, "path: sha256: must be 64 lower-case hex digits (the sha256 of the body)", {
      details: { field: "sha256" },
    });
  }
}

/** Stores an uploaded body; a declared length over the limit (or the tenant's quota) is refused before a byte is read. */
export async function receiveUpload(
  deps: UploadDeps,
  tenant: string,
  sha256: string,
  body: Readable,
  contentLength: string | undefined,
): Promise<UploadResult> {
  checkSha256(sha256);
  const declared = contentLength !== undefined && /^\d+$/.test(contentLength) ? Number(contentLength) : undefined;
  if (declared !== undefined && declared > deps.maxSize) throw tooLarge(deps.maxSize);
  const quota = quotaOf(deps.config, tenant);
  return deps.store.put(tenant, sha256, body, {
    maxSize: deps.maxSize,
    ...(quota && { quota }),
    ...(declared !== undefined && { declaredSize: declared }),
  });
}

/** An upload's size, or `not_found`. */
export async function describeUpload(deps: UploadDeps, tenant: string, sha256: string): Promise<{ sha256: string; size: number }> {
  checkSha256(sha256);
  const size = await deps.store.size(tenant, sha256);
  if (size === undefined) throw new ManentError(Code.NotFound, `no upload ${sha256} for tenant ${tenant}`);
  return { sha256, size };
}

export interface UploadListing {
  tenant: string;
  used_bytes: number;
  quota_bytes: number | null;
  uploads: (UploadEntry & { needed_by: Omit<UploadNeed, "sha256">[] })[];
}

/** A tenant's uploads with what needs each, its total and its quota. */
export async function listUploads(deps: UploadDeps, tenant: string): Promise<UploadListing> {
  const [entries, needs] = await Promise.all([deps.store.list(tenant), deps.retention.needs(tenant)]);
  return {
    tenant,
    used_bytes: entries.reduce((sum, e) => sum + e.size, 0),
    quota_bytes: uploadQuota(deps.config, tenant) ?? null,
    uploads: entries.map((e) => ({
      ...e,
      needed_by: needs.filter((n) => n.sha256 === e.sha256).map(({ sha256: _, ...need }) => need),
    })),
  };
}

/** Deletes an upload no deploy needs (409 naming the deploy that does). */
export async function deleteUpload(deps: UploadDeps, tenant: string, sha256: string): Promise<{ sha256: string; size: number }> {
  checkSha256(sha256);
  return deps.retention.remove(tenant, sha256);
}

/** Where a caller's grants are, for a refusal: "; its grants are in tenant team-a". */
function grantedIn(caller: Principal): string {
  const tenants = [...new Set(caller.grants.map((g) => g.scope.tenant))];
  return tenants.length === 0 ? "; it has no grant" : `; its grants are in tenant ${tenants.join(", ")}`;
}
