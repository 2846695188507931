import { createRoute, z } from "@hono/zod-openapi";
import { Code, ManentError } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../http-api.js";

const healthz = createRoute({
  method: "get",
  path: "/healthz",
  summary: "Liveness and database reachability",
  tags: ["meta"],
  security: [],
  responses: {
    200: { description: "serving, database reachable", content: { "application/json": { schema: z.object({ status: z.literal("ok") }) } } },
    ...errorResponses(Code.Unavailable),
  },
});

const metrics = createRoute({
  method: "get",
  path: "/metrics",
  summary: "Prometheus metrics",
  tags: ["meta"],
  security: [],
  responses: { 200: { description: "Prometheus text exposition format", content: { "text/plain": { schema: z.string() } } } },
});

export function healthRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(healthz, async (c) => {
    // Names the component that is away, never the driver's text (an internal address, a port): the log has that.
    await deps.ping().catch((err: unknown) => {
      deps.logger.warn("health check: the database does not answer", { error: ManentError.from(err).message });
      throw new ManentError(Code.Unavailable, "database unavailable", { details: { component: "database" } });
    });
    return c.json({ status: "ok" as const }, 200);
  });
  app.openapi(metrics, async (c) => {
    return c.text(await deps.metrics.metrics(), 200, { "content-type": deps.metrics.contentType });
  });
}
