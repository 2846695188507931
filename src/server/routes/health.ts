import { createRoute, z } from "@hono/zod-openapi";
import { Code, ManentError } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";

const readiness = (path: "/readyz" | "/healthz", summary: string) =>
  createRoute({
    method: "get",
    path,
    summary,
    tags: ["meta"],
    security: [],
    responses: {
      200: {
        description: "serving, database reachable",
        content: { "application/json": { schema: z.object({ status: z.literal("ok") }) } },
      },
      ...errorResponses(Code.Unavailable),
    },
  });
const readyz = readiness("/readyz", "Readiness: start-up done and the database answers (503 while starting or while it does not)");
const healthz = readiness("/healthz", "The same as /readyz (kept for earlier probes)");

const livez = createRoute({
  method: "get",
  path: "/livez",
  summary: "Liveness: the process answers (also while starting and while the database is away); nothing else is checked",
  tags: ["meta"],
  security: [],
  responses: {
    200: { description: "alive", content: { "application/json": { schema: z.object({ status: z.literal("ok") }) } } },
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
  const ready = async () => {
    // Names the component that is away, never the driver's text (an internal address, a port): the log has that.
    await deps.ping().catch((err: unknown) => {
      deps.logger.warn("health check: the database does not answer", { error: ManentError.from(err).message });
      throw new ManentError(Code.Unavailable, "database unavailable", { details: { component: "database" } });
    });
    return { status: "ok" as const };
  };
  app.openapi(readyz, async (c) => c.json(await ready(), 200));
  app.openapi(healthz, async (c) => c.json(await ready(), 200));
  // A process that answers HTTP is alive: restarting it would not bring the database back.
  app.openapi(livez, (c) => c.json({ status: "ok" as const }, 200));
  app.openapi(metrics, async (c) => {
    return c.text(await deps.metrics.metrics(), 200, { "content-type": deps.metrics.contentType });
  });
}
