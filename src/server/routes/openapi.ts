import { createRoute, z } from "@hono/zod-openapi";
import { version } from "../../version.js";
import type { ApiApp } from "../http-api.js";

export const openApiPath = "/api/v1/openapi.json";

const route = createRoute({
  method: "get",
  path: openApiPath,
  summary: "This document: the HTTP API in OpenAPI 3.1",
  tags: ["meta"],
  responses: {
    200: { description: "OpenAPI 3.1 document", content: { "application/json": { schema: z.record(z.string(), z.unknown()) } } },
  },
});

export function openApiRoute(app: ApiApp): void {
  let document: Record<string, unknown> | undefined;
  app.openapi(route, (c) => {
    document ??= app.getOpenAPI31Document({
      openapi: "3.1.0",
      info: {
        title: "manent-server API",
        version,
        description:
          'Errors are `{"error": {"code", "message", "details"}}` with gRPC-style codes. `/api/v1/` routes need `Authorization: Bearer <token>`.',
      },
      security: [{ bearer: [] }],
    }) as unknown as Record<string, unknown>;
    return c.json(document, 200);
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
}
