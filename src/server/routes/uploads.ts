import { Readable } from "node:stream";
import type { ReadableStream } from "node:stream/web";
import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { audited } from "../audit.js";
import {
  deleteUpload,
  describeUpload,
  listUploads,
  readableTenant,
  receiveUpload,
  sha256Pattern,
  tenantPattern,
  uploadTenant,
  uploadTenantToChange,
} from "../uploads.js";

/** The upload routes read their body as a stream, under artifacts.max_upload_size, not the JSON body limit. */
export const uploadsPathPattern = /^\/api\/v1\/uploads\//;

const params = z.object({
  sha256: z
    .string()
    .regex(sha256Pattern, "must be 64 lower-case hex digits (the sha256 of the body)")
    .openapi({ param: { name: "sha256", in: "path" }, example: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae" }),
});
const query = z.object({
  tenant: z
    .string()
    .max(63)
    .regex(tenantPattern, "must be lower-case letters, digits, '.', '_' or '-'")
    .optional()
    .describe("the tenant the upload belongs to (default: the caller's one tenant, if its grants name one; else untenanted)"),
});
const uploadSchema = z
  .object({
    sha256: z.string(),
    size: z.number().int().describe("bytes"),
    tenant: z.string().optional(),
    created: z.boolean().optional().describe("false when the tenant had uploaded the same bytes before (nothing was written)"),
  })
  .openapi("Upload");
const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { "application/json": { schema } } });

const put = createRoute({
  method: "put",
  path: "/api/v1/uploads/{sha256}",
  summary: "Upload an artifact (the raw bytes, streamed); a deploy then names it as artifact.source upload:<sha256>/<file name>",
  description:
    "Content-addressed and idempotent: kept only when the body's sha256 is the one in the path and its size is within " +
    "artifacts.max_upload_size; the same bytes again are not written again. A tenant the caller may not read is not found (404); " +
    "one it reads but may not submit to is refused (403).",
  tags: ["uploads"],
  request: {
    params,
    query,
    body: { required: true, content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } } },
  },
  responses: {
    201: json(uploadSchema, "stored"),
    200: json(uploadSchema, "already stored"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.ResourceExhausted),
  },
});

const get = createRoute({
  method: "get",
  path: "/api/v1/uploads/{sha256}",
  summary: "Whether a tenant's upload of these bytes is on the server (so a client need not send it again)",
  tags: ["uploads"],
  request: { params, query },
  responses: {
    200: json(uploadSchema, "the upload"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound),
  },
});

const need = z
  .object({
    deploy: z.string().describe("the deploy (the release, for release_in_progress)"),
    application: z.string(),
    artifact: z.string(),
    environment: z.string(),
    version: z.string(),
    status: z.string(),
    reason: z
      .enum(["in_progress", "release", "release_in_progress"])
      .describe(
        "in_progress: a queued or running deploy may still fetch it (status submitting or queued: submitted, not recorded yet); " +
          "release: one of the last versions released there; release_in_progress: a running release deploys it at its next stages",
      ),
  })
  .openapi("UploadNeed");
const listingSchema = z
  .object({
    tenant: z.string(),
    used_bytes: z.number().int().describe("total size of the tenant's uploads"),
    quota_bytes: z.number().int().nullable().describe("the tenant's quota (uploads.quota_per_tenant or tenant_quotas), null for none"),
    uploads: z.array(
      z.object({
        sha256: z.string(),
        size: z.number().int(),
        created_at: z.string(),
        last_used_at: z.string().nullable().describe("when a submission last named it"),
        needed_by: z.array(need).describe("the deploys that keep it: it is neither swept nor deletable while one does"),
      }),
    ),
  })
  .openapi("UploadList");

const list = createRoute({
  method: "get",
  path: "/api/v1/uploads",
  summary: "A tenant's uploads, newest first, with what deploys need each, the tenant's total and its quota",
  tags: ["uploads"],
  request: { query },
  responses: {
    200: json(listingSchema, "the tenant's uploads"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound),
  },
});

const remove = createRoute({
  method: "delete",
  path: "/api/v1/uploads/{sha256}",
  summary: "Delete an upload no deploy needs. Audited as upload_delete",
  description:
    "Refused (409, naming the deploy) while a queued or running deploy names it (also one submitted and not recorded yet), while a " +
    "running release deploys it, or while it is the artifact of one of the last " +
    "uploads.retention.keep_releases versions released in an application/artifact/environment (a rollback may return there). " +
    "Needs submit or dry_run in the tenant; a tenant the caller may not read is not found.",
  tags: ["uploads"],
  request: { params, query },
  responses: {
    200: json(z.object({ sha256: z.string(), size: z.number().int(), tenant: z.string() }).openapi("DeletedUpload"), "deleted"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.Aborted),
  },
});

const sweep = createRoute({
  method: "post",
  path: "/api/v1/uploads/sweep",
  summary: "Remove a tenant's uploads no deploy needs now, as the periodic sweep does (uploads.retention). Audited as upload_sweep",
  tags: ["uploads"],
  request: {
    query: query.extend({
      dry_run: z.enum(["true", "false"]).default("false").describe("true: only answer what would be removed"),
    }),
  },
  responses: {
    200: json(
      z
        .object({
          tenant: z.string(),
          dry_run: z.boolean(),
          removed: z.array(z.object({ sha256: z.string(), size: z.number().int() })),
          removed_bytes: z.number().int(),
        })
        .openapi("UploadSweep"),
      "what was removed (or would be)",
    ),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound),
  },
});

export function uploadRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => {
    const tenant = readableTenant(c.get("caller"), c.req.valid("query").tenant, (t) => `no uploads for tenant ${t}`);
    return c.json(await listUploads(deps.uploads, tenant), 200);
  });
  app.openapi(sweep, async (c) => {
    const q = c.req.valid("query");
    const tenant = uploadTenantToChange(c.get("caller"), q.tenant, (t) => `no uploads for tenant ${t}`);
    const dryRun = q.dry_run === "true";
    const run = () => deps.uploads.retention.sweep({ tenant, dryRun });
    const swept = dryRun ? await run() : await audited(c, "upload_sweep", { tenant, subject: "uploads no deploy needs" }, run);
    const removed = swept.map(({ sha256, size }) => ({ sha256, size }));
    return c.json({ tenant, dry_run: dryRun, removed, removed_bytes: removed.reduce((sum, r) => sum + r.size, 0) }, 200);
  });
  app.openapi(remove, async (c) => {
    const { sha256 } = c.req.valid("param");
    const tenant = uploadTenantToChange(c.get("caller"), c.req.valid("query").tenant, (t) => `no upload ${sha256} for tenant ${t}`);
    const deleted = await audited(c, "upload_delete", { tenant, subject: `upload ${sha256}` }, () =>
      deleteUpload(deps.uploads, tenant, sha256),
    );
    return c.json({ ...deleted, tenant }, 200);
  });
  app.openapi(put, async (c) => {
    const { sha256 } = c.req.valid("param");
    const tenant = uploadTenant(c.get("caller"), c.req.valid("query").tenant);
    const raw = c.req.raw.body;
    const body = raw ? Readable.fromWeb(raw as ReadableStream<Uint8Array>) : Readable.from([]);
    const stored = await receiveUpload(deps.uploads, tenant, sha256, body, c.req.header("content-length"));
    return c.json({ ...stored, tenant }, stored.created ? 201 : 200);
  });
  app.openapi(get, async (c) => {
    const { sha256 } = c.req.valid("param");
    const tenant = readableTenant(c.get("caller"), c.req.valid("query").tenant, (t) => `no upload ${sha256} for tenant ${t}`);
    return c.json(await describeUpload(deps.uploads, tenant, sha256), 200);
  });
}
