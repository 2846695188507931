import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { actions, allowingGrant, describeGrant, refusal, roleNames, type Grant, type Principal } from "../../core/identity/index.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp } from "../api-deps.js";
import { nameQuery } from "./deploys.js";

const grantSchema = z
  .object({
    role: z.enum(roleNames),
    scope: z
      .object({ tenant: z.string(), application: z.string(), environment: z.string() })
      .describe('where the role applies: patterns, "*" for any run of characters'),
  })
  .openapi("Grant");

const principalSchema = z
  .object({
    kind: z.enum(["user", "token", "workload", "anonymous"]),
    id: z
      .string()
      .describe('unique: "user:<subject>", "token:<name>", "workload:<issuer>#<subject>" (a CI job\'s ID token) or "anonymous"'),
    name: z.string().describe("a person's verified e-mail (else subject), a token's name, or a CI job's subject"),
    email: z.string().optional(),
    groups: z.array(z.string()).describe("a person's groups (empty for a token)"),
    grants: z.array(grantSchema).describe("the roles bound to the caller and where they apply"),
  })
  .openapi("Principal");

const whoami = createRoute({
  method: "get",
  path: "/api/v1/whoami",
  summary: "Who the caller is and what it may do where (the web UI's sign-in and `manent auth whoami` show it)",
  tags: ["session"],
  responses: {
    200: { description: "the caller", content: { "application/json": { schema: principalSchema } } },
    ...errorResponses(Code.Unauthenticated),
  },
});

// A scope value as the API names it, or a single "*" for "any" (what a list or a server-wide action needs).
const scopeValue = nameQuery.or(z.literal("*"));

const canI = createRoute({
  method: "get",
  path: "/api/v1/auth/can-i",
  summary: "Whether the caller may take an action somewhere, and why (the grant that allows it, or the permission missing)",
  description: "Answers 200 either way; `allowed` says. A scope field left out means any value, so only a grant for all of them allows it.",
  tags: ["session"],
  request: {
    query: z.object({
      action: z
        .enum(actions)
        .describe(
          "read, submit, dry_run, rollback, cancel, approve, promote, abort, plugin_restart, envconfig_refresh, audit_read, token_admin",
        ),
      tenant: scopeValue.default("untenanted").describe("the tenant (default untenanted, as a descriptor's)"),
      application: scopeValue.optional(),
      environment: scopeValue.optional(),
    }),
  },
  responses: {
    200: {
      description: "the answer",
      content: {
        "application/json": {
          schema: z
            .object({
              allowed: z.boolean(),
              reason: z.string().describe("the grant that allows it, or the permission missing"),
              grant: grantSchema.optional().describe("the grant that allows it"),
            })
            .openapi("CanI"),
        },
      },
    },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

export function sessionRoutes(app: ApiApp): void {
  app.openapi(whoami, (c) => c.json(principalJson(c.get("caller")), 200));

  app.openapi(canI, (c) => {
    const q = c.req.valid("query");
    const caller = c.get("caller");
    const scope = {
      tenant: q.tenant,
      ...(q.application !== undefined && q.application !== "*" && { application: q.application }),
      ...(q.environment !== undefined && q.environment !== "*" && { environment: q.environment }),
    };
    const grant = allowingGrant(caller, q.action, scope);
    if (grant) return c.json({ allowed: true, reason: `allowed by ${describeGrant(grant)}`, grant: grantJson(grant) }, 200);
    return c.json({ allowed: false, reason: refusal(caller, q.action, scope).message }, 200);
  });
}

function grantJson(g: Grant): z.output<typeof grantSchema> {
  return { role: g.role, scope: { tenant: g.scope.tenant, application: g.scope.application, environment: g.scope.environment } };
}

/** The caller as the API shows it; nothing of its credential. */
export function principalJson(p: Principal): z.output<typeof principalSchema> {
  return {
    kind: p.kind,
    id: p.id,
    name: p.name,
    ...(p.email !== undefined && { email: p.email }),
    groups: [...p.groups],
    grants: p.grants.map(grantJson),
  };
}
