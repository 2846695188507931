import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { roleNames } from "../../core/identity/index.js";
import type { ManagedToken } from "../../storage/pg-token-store.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { nameQuery } from "./deploys.js";

/** The longest a managed token may live: a token that never expires is one nobody remembers to revoke. */
export const maxTokenLifetimeMs = 366 * 24 * 3600 * 1000;
const unitMs = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'`);

const tokenSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    role: z.enum(roleNames),
    tenant: z.string(),
    application: z.string(),
    environment: z.string(),
    created_at: z.string(),
    created_by: z.string().describe("who created it: a person's e-mail or subject, a token's name"),
    created_by_id: z.string().describe('the creator\'s unique id ("user:<sub>", "token:<name>", "anonymous")'),
    expires_at: z.string(),
    last_used_at: z.string().nullable().describe("the last request made with it (recorded at most every few seconds)"),
    revoked_at: z.string().nullable(),
    revoked_by: z.string().nullable(),
    status: z.enum(["active", "expired", "revoked"]),
  })
  .openapi("ApiToken");

const createBody = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(63)
      .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, "must be lower-case letters, digits, '.', '_' or '-'")
      .describe("unique, and never reused (names of revoked tokens are kept); not a manent.yml token's name"),
    role: z.enum(roleNames).describe("what the token may do; never more than the caller may do itself"),
    tenant: pattern("tenant").describe('the tenants it may act on: a name, a pattern, or "*"'),
    application: pattern("application").default("*"),
    environment: pattern("environment").default("*"),
    expires_in: z
      .string()
      .regex(/^[1-9][0-9]{0,5}[mhd]$/, 'must be a number and a unit: m, h or d (e.g. "30d", "12h")')
      .transform((v) => Number(v.slice(0, -1)) * unitMs[v.slice(-1) as keyof typeof unitMs])
      .refine((ms) => ms <= maxTokenLifetimeMs, "at most 366d")
      .describe('how long it is valid from now, e.g. "30d", "12h", "90m" (at most 366d)'),
  })
  .openapi("NewApiToken");

const idParam = z.object({
  id: z
    .string()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "not an API token id")
    .describe("the token's id (from the create answer or the list)"),
});

const create = createRoute({
  method: "post",
  path: "/api/v1/tokens",
  summary:
    "Create an API token with a role over tenant, application and environment patterns (token_admin there, and never more than the caller may do). " +
    "Its value is in this answer only: the server keeps its sha256. Audited as token_create",
  tags: ["tokens"],
  request: { body: { required: true, content: { "application/json": { schema: createBody } } } },
  responses: {
    201: {
      description: "the token, with its value (shown this once)",
      content: {
        "application/json": {
          schema: tokenSchema
            .extend({ token: z.string().describe('the value to send as "Authorization: Bearer …": mnt_ and 43 characters') })
            .openapi("CreatedApiToken"),
        },
      },
    },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.AlreadyExists),
  },
});

const list = createRoute({
  method: "get",
  path: "/api/v1/tokens",
  summary: "The managed API tokens the caller may administer, newest first (never their values)",
  tags: ["tokens"],
  request: {
    query: z.object({
      tenant: nameQuery.describe("only tokens for this tenant"),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
    }),
  },
  responses: {
    200: { description: "tokens", content: { "application/json": { schema: z.object({ tokens: z.array(tokenSchema) }) } } },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied),
  },
});

const revoke = createRoute({
  method: "delete",
  path: "/api/v1/tokens/{id}",
  summary: "Revoke an API token: every server refuses it from the next request on. Audited as token_revoke",
  tags: ["tokens"],
  request: { params: idParam },
  responses: {
    200: { description: "the token, revoked", content: { "application/json": { schema: tokenSchema } } },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.FailedPrecondition),
  },
});

function view(t: ManagedToken, now = Date.now()): z.infer<typeof tokenSchema> {
  return {
    id: t.id,
    name: t.name,
    role: t.grant.role,
    ...t.grant.scope,
    created_at: t.created_at,
    created_by: t.created_by.name,
    created_by_id: t.created_by.id,
    expires_at: t.expires_at,
    last_used_at: t.last_used_at,
    revoked_at: t.revoked_at,
    revoked_by: t.revoked_by?.name ?? null,
    status: t.revoked_at !== null ? "revoked" : Date.parse(t.expires_at) <= now ? "expired" : "active",
  };
}

export function tokenRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(create, async (c) => {
    const body = c.req.valid("json");
    const grant = { role: body.role, scope: { tenant: body.tenant, application: body.application, environment: body.environment } };
    // Wrapped: the audit entry names the token, and the token's id is not taken for a deploy's.
    const { created } = await audited(c, "token_create", { ...grant.scope, subject: `token ${body.name} (${body.role})` }, async () => ({
      created: await deps.tokens.create(c.get("caller"), { name: body.name, grant, expiresInMs: body.expires_in }),
    }));
    return c.json({ ...view(created), token: created.token }, 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const tokens = await deps.tokens.list(c.get("caller"), { ...(q.tenant !== undefined && { tenant: q.tenant }), limit: q.limit });
    return c.json({ tokens: tokens.map((t) => view(t)) }, 200);
  });

  app.openapi(revoke, async (c) => {
    const { id } = c.req.valid("param");
    const known = await deps.tokens.get(id);
    const subject = known ? `token ${known.name}` : `token ${id}`;
    const { revoked } = await audited(c, "token_revoke", { ...(known ? known.grant.scope : { tenant: null }), subject }, async () => ({
      revoked: await deps.tokens.revoke(c.get("caller"), id),
    }));
    return c.json(view(revoked), 200);
  });
}
