import { createRoute, z } from "@hono/zod-openapi";
import { readOverview } from "../../core/environments/overview.js";
import { Code } from "../../core/errors.js";
import { deployStatus, envconfigOriginSchema, errorResponses } from "../api-schemas.js";
import { scopesFor } from "../identity/index.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { nameQuery } from "./deploys.js";

const deployKind = z.enum(["deploy", "rollback"]);

const overviewDeploySchema = z
  .object({
    id: z.string(),
    kind: deployKind,
    version: z.string(),
    status: deployStatus,
    by: z.string().nullable().describe("who submitted it: a person's e-mail (or subject) or a token's name"),
    created_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .openapi("OverviewDeploy");

const overviewSchema = z
  .object({
    environments: z
      .array(z.string())
      .describe("every environment of the rows, ordered by when each was first deployed to (the columns of the overview)"),
    rows: z.array(
      z
        .object({
          tenant: z.string(),
          application: z.string(),
          artifact: z.string(),
          cells: z.array(
            z
              .object({
                environment: z.string(),
                live: overviewDeploySchema.nullable().describe("the release running there: the last deploy or rollback that succeeded"),
                last: overviewDeploySchema
                  .nullable()
                  .describe("the last deploy or rollback submitted there, whatever its status; null where a release waits to deploy first"),
                in_progress: overviewDeploySchema
                  .extend({
                    rollout: z.string().nullable().describe('where its rollout stands: "canary step 2/4 at 25 %", "wave 2 of 3"'),
                    waiting: z.string().nullable().describe("what it waits for and how to go on (a pause, an approval)"),
                  })
                  .nullable()
                  .describe("the newest deploy queued or running there"),
                drift: z
                  .object({
                    state: z
                      .enum(["in_sync", "drifted", "unknown", "error"])
                      .describe(
                        "drifted when any target is, else error when a check failed on one, else unknown when the plugin cannot tell",
                      ),
                    drifted: z.number().int().describe("targets found drifted"),
                    targets: z.number().int().describe("targets checked"),
                    checked_at: z.string(),
                  })
                  .nullable()
                  .describe("the last drift check (manent diff, or the envconfig's drift.interval); null when none has run"),
                envconfig: z
                  .object({
                    state: z
                      .enum(["current", "behind", "unknown"])
                      .describe(
                        "behind: the envconfig a deploy would read now (for git: at the fetched head of the ref) differs from the one the running release ran; unknown: either cannot be told",
                      ),
                    deployed: envconfigOriginSchema.nullable().describe("where the running release's envconfig came from"),
                    head: envconfigOriginSchema.nullable().describe("where a deploy now would read it"),
                  })
                  .nullable()
                  .describe("whether the running release has the envconfig of now; null when nothing runs here")
                  .openapi("OverviewEnvconfig"),
                pending: z
                  .array(
                    z
                      .object({
                        release_id: z.string(),
                        version: z.string(),
                        waiting_for: z
                          .enum(["promotion", "approval", "soak", "analysis"])
                          .describe("a manual promotion or an approval to enter here, or the soak or analysis of the stage before"),
                        from: z.array(z.string()).describe("the environments of the stage before; [] before the release's first stage"),
                        since: z.string(),
                        until: z.string().nullable().describe("when the soak ends or the approval times out"),
                        hint: z.string().describe("what it waits for and how to go on, in the release's words"),
                        action: z
                          .enum(["promote", "approve"])
                          .nullable()
                          .describe(
                            "what a user does to move it on here (POST /api/v1/releases/{id}/promote or /approve); null: only time does",
                          ),
                      })
                      .openapi("OverviewPending"),
                  )
                  .describe("releases waiting to come into this environment next, oldest first"),
              })
              .openapi("OverviewCell"),
          ),
        })
        .openapi("OverviewRow"),
    ),
  })
  .openapi("Overview");

const get = createRoute({
  method: "get",
  path: "/api/v1/overview",
  summary:
    "What runs where: every application's artifact by environment, with its live release, last deploy, rollout in progress and the releases waiting to come in",
  tags: ["deploys"],
  request: {
    query: z.object({
      tenant: nameQuery.describe("only this tenant (a caller sees only what its grants let it read, whatever it asks)"),
      application: nameQuery,
    }),
  },
  responses: {
    200: { description: "the overview", content: { "application/json": { schema: overviewSchema } } },
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

export function overviewRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(get, async (c) => {
    const q = c.req.valid("query");
    const overview = await readOverview(
      deps.overview,
      {
        scopes: scopesFor(c.get("caller"), "read"),
        ...(q.tenant !== undefined && { tenant: q.tenant }),
        ...(q.application !== undefined && { application: q.application }),
      },
      deps.releaseStore,
      deps.envconfigHeads,
    );
    return c.json(overview, 200);
  });
}
