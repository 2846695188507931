import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { authorize } from "../../core/identity/index.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";

const refreshResult = z
  .object({
    provider: z.string().describe("The provider's name in manent.yml"),
    before: z.string().nullable().describe("The commit read before the refresh (null: none yet)"),
    after: z.string().nullable().describe("The commit read after it (the same as before when it failed)"),
    error: z.string().nullable().describe("Why the refresh failed (credentials removed); null when it succeeded"),
  })
  .openapi("EnvconfigRefresh");

const autoDeployResult = z
  .object({
    tenant: z.string(),
    application: z.string(),
    artifact: z.string(),
    environment: z.string(),
    commit: z.string().nullable().describe("The commit whose envconfig it deploys; null when the envconfig does not load"),
    sha256: z.string().nullable().describe("The sha256 of that envconfig file; null when it does not load"),
    deploy_id: z.string().nullable().describe("The deploy submitted; null when it could not be"),
    error: z
      .string()
      .nullable()
      .describe(
        "Why it could not be submitted (the envconfig refused, naming file and field); null when it was. An envconfig from git that no longer loads is told at every refresh, whether it asks for auto_deploy or not (that cannot be read)",
      ),
  })
  .openapi("AutoDeploy");

const refresh = createRoute({
  method: "post",
  path: "/api/v1/envconfig/refresh",
  summary:
    "Fetch every git envconfig provider's repository now (a fetch already running is joined). A failure keeps the last good commit and is reported per provider. " +
    "Providers serve every tenant, so it needs the envconfig_refresh permission everywhere (admin); audited as envconfig_refresh",
  tags: ["envconfig"],
  responses: {
    200: {
      description: "per provider, and the deploys of environments whose envconfig changed and asks for auto_deploy",
      content: { "application/json": { schema: z.object({ providers: z.array(refreshResult), auto_deploys: z.array(autoDeployResult) }) } },
    },
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
    // What the fetch changed in the envconfig of environments that ask for auto_deploy is submitted now.
    const autoDeploys = (await deps.autoDeploy?.run()) ?? [];
    return c.json(
      {
        providers: providers.map((p) => ({
          provider: p.provider,
          before: p.before ?? null,
          after: p.after ?? null,
          error: p.error ?? null,
        })),
        auto_deploys: autoDeploys.map((a) => ({ ...a, deploy_id: a.deploy_id ?? null, error: a.error ?? null })),
      },
      200,
    );
  });
}
