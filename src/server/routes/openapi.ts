import { createRoute, z } from "@hono/zod-openapi";
import { version } from "../../version.js";
import type { ApiApp } from "../api-deps.js";

export const openApiPath = "/api/v1/openapi.json";

const route = createRoute({
  method: "get",
  path: openApiPath,
  operationId: "getOpenApiDocument",
  summary: "This document: the HTTP API in OpenAPI 3.1",
  tags: ["meta"],
  responses: {
    200: { description: "OpenAPI 3.1 document", content: { "application/json": { schema: z.record(z.string(), z.unknown()) } } },
  },
});

const methods = ["get", "put", "post", "delete", "patch", "head", "options"] as const;

/**
 * `getDeploysById` for GET /api/v1/deploys/{id}: the method, then each path segment after
 * `/api/v1/` (a parameter as `By<Name>`). Unique because method and path are, stable as long as
 * the route is, so generated clients keep their method names; a route's own `operationId` wins.
 */
export function derivedOperationId(method: string, path: string): string {
  const pascal = (s: string) =>
    s
      .split(/[^A-Za-z0-9]+/)
      .filter(Boolean)
      .map((w) => w[0]!.toUpperCase() + w.slice(1))
      .join("");
  const segments = path
    .replace(/^\/api\/v1\//, "/")
    .split("/")
    .filter(Boolean)
    .map((s) => (/^\{.+\}$/.test(s) ? `By${pascal(s.slice(1, -1))}` : pascal(s)));
  return method + segments.join("");
}

function withOperationIds(document: { paths?: Record<string, Record<string, unknown>> }): void {
  for (const [path, operations] of Object.entries(document.paths ?? {})) {
    for (const method of methods) {
      const operation = operations[method] as { operationId?: string } | undefined;
      if (operation && !operation.operationId) operation.operationId = derivedOperationId(method, path);
    }
  }
}

export function openApiRoute(app: ApiApp): void {
  let document: Record<string, unknown> | undefined;
  app.openapi(route, (c) => {
    if (!document) {
      const built = app.getOpenAPI31Document({
        openapi: "3.1.0",
        info: {
          title: "manent-server API",
          version,
          license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
          description:
            'Errors are `{"error": {"code", "message", "details"}}` with gRPC-style codes. `/api/v1/` routes need `Authorization: Bearer <token>`.',
        },
        servers: [
          {
            url: "http://127.0.0.1:8080",
            description: "manent-server's default listen address (manent.yml `listen`); use your server's own URL",
          },
        ],
        security: [{ bearer: [] }],
      });
      withOperationIds(built as unknown as { paths?: Record<string, Record<string, unknown>> });
      document = built as unknown as Record<string, unknown>;
    }
    return c.json(document, 200);
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
}
