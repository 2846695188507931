import { createRoute, z } from "@hono/zod-openapi";
import { capabilitiesOf } from "../../core/contract/index.js";
import { Code } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps } from "../http-api.js";

const pluginSchema = z
  .object({
    name: z.string(),
    kind: z.string().describe("builtin or external"),
    capabilities: z.array(z.string()).nullable().describe("null for an external plugin not started yet"),
    capabilities_as_of: z.string().nullable().optional().describe("external plugins: when the capabilities were last read"),
    status: z
      .enum(["not_started", "up", "restarting", "gave_up", "stopped"])
      .optional()
      .describe("external plugins: the process as this server's supervisor sees it"),
    restarts: z.number().int().optional().describe("external plugins: restarts after a crash or a hung process since the server started"),
    last_start: z.string().nullable().optional().describe("external plugins: when the running (or last) process finished its handshake"),
  })
  .openapi("Plugin");

const list = createRoute({
  method: "get",
  path: "/api/v1/plugins",
  summary: "The server's plugins and their capabilities (external plugins are not started for this)",
  tags: ["plugins"],
  responses: {
    200: { description: "plugins", content: { "application/json": { schema: z.object({ plugins: z.array(pluginSchema) }) } } },
    ...errorResponses(Code.Unauthenticated),
  },
});

export function pluginRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => c.json({ plugins: await listPlugins(deps) }, 200));
}

/** Plugins and their capabilities, without starting external processes: theirs are as of their last start. */
async function listPlugins(deps: ApiDeps) {
  const known = await deps.store.loadCapabilities();
  return Promise.all(
    deps.plugins.list().map(async (p) => {
      if (p.kind === "builtin") return { name: p.name, kind: p.kind, capabilities: capabilitiesOf(await p.deployer()) as string[] };
      const seen = known.get(p.name);
      return {
        name: p.name,
        kind: p.kind,
        capabilities: (seen?.capabilities as string[] | undefined) ?? null,
        capabilities_as_of: seen?.updated_at ?? null,
        ...p.supervision?.(),
      };
    }),
  );
}
