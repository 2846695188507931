import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { authorize } from "../../core/identity/index.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps } from "../http-api.js";

const refreshResult = z
  .object({
    provider: z.string().describe("The provider's name in manent.yml"),
    before: z.string().nullable().describe("The commit read before the refresh (null: none yet)"),
    after: z.string().nullable().describe("The commit read after it (the same as before when it failed)"),
    error: z.string().nullable().describe("Why the refresh failed (credentials removed); null when it succeeded"),
  })
  .openapi("EnvconfigRefresh");

const refresh = createRoute({
  method: "post",
  path: "/api/v1/envconfig/refresh",
  summary:
    "Fetch every git envconfig provider's repository now (a fetch already running is joined). A failure keeps the last good commit and is reported per provider. " +
    "Providers serve every tenant, so it needs the envconfig_refresh permission everywhere (admin); audited as envconfig_refresh",
  tags: ["envconfig"],
  responses: {
    200: { description: "per provider", content: { "application/json": { schema: z.object({ providers: z.array(refreshResult) }) } } },
    ...errorResponses(Code.Unauthenticated, Code.PermissionDenied),
  },
});

export function envconfigRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(refresh, async (c) => {
    const caller = c.get("caller");
    const providers = await audited(c, "envconfig_refresh", { tenant: null, subject: "envconfig" }, async () => {
      authorize(caller, "envconfig_refresh", { tenant: "*", application: "*", environment: "*" });
      return Promise.all((deps.gitEnvconfig ?? []).map((r) => r.refresh()));
    });
    return c.json(
      {
        providers: providers.map((p) => ({
          provider: p.provider,
          before: p.before ?? null,
          after: p.after ?? null,
          error: p.error ?? null,
        })),
      },
      200,
    );
  });
}
