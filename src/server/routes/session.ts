import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp } from "../http-api.js";

const whoami = createRoute({
  method: "get",
  path: "/api/v1/whoami",
  summary: "The token's name and the tenant it may see (the web UI's sign-in checks the token with it)",
  tags: ["session"],
  responses: {
    200: {
      description: "the caller",
      content: {
        "application/json": {
          schema: z.object({ name: z.string(), tenant: z.string().describe('"*" for every tenant') }).openapi("Caller"),
        },
      },
    },
    ...errorResponses(Code.Unauthenticated),
  },
});

export function sessionRoutes(app: ApiApp): void {
  app.openapi(whoami, (c) => {
    const { name, tenant } = c.get("caller");
    return c.json({ name, tenant }, 200);
  });
}
