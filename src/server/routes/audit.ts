import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../http-api.js";
import { nameQuery } from "./deploys.js";

const entrySchema = z
  .object({
    id: z.number().int(),
    at: z.string(),
    actor: z.string().nullable().describe("the API token's name; null for a refused sign-in"),
    tenant: z.string().nullable(),
    action: z.string().describe("submit, dry_run, rollback, cancel, approve, promote, abort, plugin_restart, sign_in"),
    deploy_id: z.string().nullable(),
    outcome: z.string().describe('"ok", or the error code the action failed with'),
    message: z.string().nullable().describe('the error of a failed action; plugin_restart names its plugin ("plugin NAME") here'),
    client_address: z.string().nullable(),
  })
  .openapi("AuditEntry");

const list = createRoute({
  method: "get",
  path: "/api/v1/audit",
  summary: "The audit log, newest first (append-only: there is no route to change it)",
  tags: ["audit"],
  request: {
    query: z.object({
      tenant: nameQuery.describe("ignored for a tenant's token, which sees its own tenant's entries only"),
      actor: z.string().max(200).optional().describe("a token's name"),
      action: z
        .string()
        .max(40)
        .regex(/^[a-z_]+$/, "must be lower-case letters and '_'")
        .optional(),
      deploy_id: z
        .string()
        .regex(/^[0-9a-f-]{36}$/, "not a deploy id")
        .optional(),
      outcome: z
        .string()
        .max(40)
        .regex(/^[a-z_]+$/, "must be lower-case letters and '_'")
        .optional(),
      before: z.coerce.number().int().min(1).optional().describe("entries older than this id (paging)"),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
    }),
  },
  responses: {
    200: { description: "entries", content: { "application/json": { schema: z.object({ entries: z.array(entrySchema) }) } } },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

export function auditRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const caller = c.get("caller");
    const tenant = caller.tenant === "*" ? q.tenant : caller.tenant;
    const entries = await deps.audit.list({
      ...(tenant !== undefined && { tenant }),
      ...(q.actor !== undefined && { actor: q.actor }),
      ...(q.action !== undefined && { action: q.action }),
      ...(q.deploy_id !== undefined && { deploy_id: q.deploy_id }),
      ...(q.outcome !== undefined && { outcome: q.outcome }),
      ...(q.before !== undefined && { before: q.before }),
      limit: q.limit,
    });
    return c.json({ entries }, 200);
  });
}
