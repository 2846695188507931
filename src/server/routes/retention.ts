import { createRoute, z } from "@hono/zod-openapi";
import { Code, ManentError } from "../../core/errors.js";
import { authorize } from "../../core/identity/index.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";

const sweep = createRoute({
  method: "post",
  path: "/api/v1/retention/sweep",
  summary:
    "Delete now the history the retention policy lets go (retention in manent.yml), as the periodic sweep does; joins a sweep running on this server. " +
    "The history of every tenant, so it needs the retention_sweep permission everywhere (admin); audited as retention_sweep",
  tags: ["retention"],
  responses: {
    200: {
      description: "what was deleted",
      content: {
        "application/json": {
          schema: z
            .object({
              deploys: z.number().int().describe("Ended deploys deleted, with their steps, targets, events and workflow checkpoints"),
              releases: z.number().int().describe("Ended releases deleted, with their events and workflow checkpoints"),
              audit_entries: z.number().int().describe("Audit entries exported, then deleted"),
              audit_files: z.array(z.string()).describe("The files the audit entries were exported to"),
            })
            .openapi("RetentionSweep"),
        },
      },
    },
    ...errorResponses(Code.Unauthenticated, Code.PermissionDenied, Code.FailedPrecondition, Code.Aborted),
  },
});

export function retentionRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(sweep, async (c) => {
    const caller = c.get("caller");
    const result = await audited(c, "retention_sweep", { tenant: null, subject: "history" }, async () => {
      authorize(caller, "retention_sweep", { tenant: "*", application: "*", environment: "*" });
      if (!deps.retention)
        throw new ManentError(Code.FailedPrecondition, "no retention policy is configured (retention in manent.yml): everything is kept");
      const swept = await deps.retention.now();
      if (!swept) throw new ManentError(Code.Aborted, "another server of the fleet is sweeping now: its sweep deletes the same");
      return swept;
    });
    return c.json(result, 200);
  });
}
