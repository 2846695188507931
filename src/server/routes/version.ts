import { createRoute, z } from "@hono/zod-openapi";
import { version } from "../../version.js";
import type { ApiApp } from "../api-deps.js";

/** Answered without a token (as the OpenAPI document is): `manent version` shows it before any sign-in. */
export const versionPath = "/api/v1/version";

const versionSchema = z
  .object({
    version: z.string().describe("manent-server's version (package.json), e.g. 0.1.0"),
    api: z.literal("v1").describe("the API's version: the prefix of its routes"),
  })
  .openapi("ServerVersion");

const route = createRoute({
  method: "get",
  path: versionPath,
  summary: "The server's version (no token needed)",
  tags: ["meta"],
  security: [],
  responses: { 200: { description: "the server's version", content: { "application/json": { schema: versionSchema } } } },
});

export function versionRoute(app: ApiApp): void {
  app.openapi(route, (c) => c.json({ version, api: "v1" as const }, 200));
}
