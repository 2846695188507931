import { createRoute, z } from "@hono/zod-openapi";
import { descriptorSchema, validate } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { mayRead } from "../../core/identity/index.js";
import { errorResponses, driftCheckBodySchema } from "../api-schemas.js";
import { driftReportSchema, driftTargetSchema } from "../drift-schemas.js";
import { scopesFor } from "../identity/index.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { nameQuery } from "./deploys.js";

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { "application/json": { schema } } });

const list = createRoute({
  method: "get",
  path: "/api/v1/drift",
  summary: "The last drift check of each target: whether it still runs what manent deployed",
  tags: ["drift"],
  request: {
    query: z.object({
      tenant: nameQuery.describe("only this tenant (a caller sees only what its grants let it read, whatever it asks)"),
      application: nameQuery,
      environment: nameQuery,
      artifact: nameQuery,
    }),
  },
  responses: {
    200: json(z.object({ targets: z.array(driftTargetSchema) }), "one record per target"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

const check = createRoute({
  method: "post",
  path: "/api/v1/drift/checks",
  summary: "Check now whether the targets of a descriptor's application and environment still run the last release deployed",
  tags: ["drift"],
  request: { body: { required: true, content: { "application/json": { schema: driftCheckBodySchema } } } },
  responses: {
    200: json(driftReportSchema, "the check, also recorded"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound, Code.Unavailable),
  },
});

export function driftRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const targets = await deps.drift.store.list({
      scopes: scopesFor(c.get("caller"), "read"),
      ...(q.tenant !== undefined && { tenant: q.tenant }),
      ...(q.application !== undefined && { application: q.application }),
      ...(q.environment !== undefined && { environment: q.environment }),
      ...(q.artifact !== undefined && { artifact: q.artifact }),
    });
    return c.json({ targets }, 200);
  });

  app.openapi(check, async (c) => {
    const body = c.req.valid("json");
    const d = validate(body.descriptor, body.descriptor_file, descriptorSchema);
    const key = { tenant: d.tenant, application: d.application, artifact: d.artifact.name, environment: d.environment };
    // Reading drift is reading the environment: what the caller may not read does not exist for it.
    if (!mayRead(c.get("caller"), key)) {
      throw new ManentError(
        Code.NotFound,
        `no succeeded deploy of ${key.tenant}/${key.application} (artifact ${key.artifact}) in environment ${key.environment}: nothing to compare the targets with`,
      );
    }
    const report = await deps.drift.checker.checkKey(key);
    const { heal_deploy_id: _, ...shown } = report;
    return c.json(shown, 200);
  });
}
