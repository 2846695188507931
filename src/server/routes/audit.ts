import { createRoute, z } from "@hono/zod-openapi";
import { safeText } from "../../core/config/index.js";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { auditActions, authorize } from "../../core/identity/index.js";
import { scopesFor } from "../identity/index.js";
import { nameQuery } from "./deploys.js";

const entrySchema = z
  .object({
    id: z.number().int(),
    at: z.string(),
    actor: z
      .string()
      .nullable()
      .describe("who acted: a person's e-mail (else subject) or a token's name; null when unknown (a refused sign-in)"),
    actor_kind: z
      .string()
      .nullable()
      .describe("user, token, workload (a CI job's ID token) or anonymous; null when unknown or for entries from before it was recorded"),
    actor_id: z
      .string()
      .nullable()
      .describe('the principal\'s unique id: "user:<subject>", "token:<name>", "workload:<issuer>#<subject>" or "anonymous"'),
    actor_email: z.string().nullable(),
    actor_groups: z.array(z.string()).nullable().describe("a person's groups when they acted"),
    tenant: z.string().nullable(),
    application: z.string().nullable(),
    environment: z.string().nullable(),
    action: z.string().describe(auditActions.join(", ")),
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
      tenant: nameQuery.describe("only this tenant (a caller sees only the entries where it has audit_read)"),
      actor: z
        .string()
        .refine(safeText(256), "must be at most 256 characters, without NUL or control characters")
        .optional()
        .describe("who acted, by name: a token's name or a person's e-mail"),
      actor_id: z
        .string()
        .refine(safeText(3000), "must be at most 3000 characters, without NUL or control characters")
        .optional()
        .describe('who acted, by id: "user:<subject>", "token:<name>", "workload:<issuer>#<subject>"'),
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
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied),
  },
});

export function auditRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const caller = c.get("caller");
    const scopes = scopesFor(caller, "audit_read");
    // Without audit_read anywhere, the log is forbidden (403 naming it); with it somewhere, filtered to there.
    if (scopes.length === 0) authorize(caller, "audit_read", { tenant: q.tenant ?? "*" });
    const entries = await deps.audit.list({
      scopes,
      ...(q.tenant !== undefined && { tenant: q.tenant }),
      ...(q.actor !== undefined && { actor: q.actor }),
      ...(q.actor_id !== undefined && { actor_id: q.actor_id }),
      ...(q.action !== undefined && { action: q.action }),
      ...(q.deploy_id !== undefined && { deploy_id: q.deploy_id }),
      ...(q.outcome !== undefined && { outcome: q.outcome }),
      ...(q.before !== undefined && { before: q.before }),
      limit: q.limit,
    });
    return c.json({ entries }, 200);
  });
}
