import { Readable } from "node:stream";
import type { ReadableStream } from "node:stream/web";
import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../http-api.js";
import { describeUpload, receiveUpload, sha256Pattern, tenantPattern, uploadTenant } from "../uploads.js";

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
    "artifacts.max_upload_size; the same bytes again are not written again.",
  tags: ["uploads"],
  request: {
    params,
    query,
    body: { required: true, content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } } },
  },
  responses: {
    201: json(uploadSchema, "stored"),
    200: json(uploadSchema, "already stored"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied),
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
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound),
  },
});

export function uploadRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(put, async (c) => {
    const { sha256 } = c.req.valid("param");
    const tenant = uploadTenant(c.get("caller"), c.req.valid("query").tenant, "store");
    const raw = c.req.raw.body;
    const body = raw ? Readable.fromWeb(raw as ReadableStream<Uint8Array>) : Readable.from([]);
    const stored = await receiveUpload(deps.uploads, tenant, sha256, body, c.req.header("content-length"));
    return c.json({ ...stored, tenant }, stored.created ? 201 : 200);
  });
  app.openapi(get, async (c) => {
    const { sha256 } = c.req.valid("param");
    const tenant = uploadTenant(c.get("caller"), c.req.valid("query").tenant, "read");
    return c.json(await describeUpload(deps.uploads, tenant, sha256), 200);
  });
}
