import { createRoute, z } from "@hono/zod-openapi";
import { capabilitiesOf } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { authorize } from "../../core/identity/index.js";
import { scopesFor } from "../identity/index.js";

const pluginSchema = z
  .object({
    name: z.string(),
    kind: z.string().describe("builtin or external"),
    capabilities: z.array(z.string()).nullable().describe("null for an external plugin not started yet"),
    capabilities_as_of: z.string().nullable().optional().describe("external plugins: when the capabilities were last read"),
    status: z
      .enum(["not_started", "starting", "up", "restarting", "start_failed", "gave_up", "stopped"])
      .optional()
      .describe(
        "external plugins: the process as this server's supervisor sees it (start_failed: its last start failed and nothing is starting; the next use tries again)",
      ),
    last_error: z
      .string()
      .nullable()
      .optional()
      .describe("external plugins: why the last start or process failed, while restarting, start_failed or gave_up"),
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
    ...errorResponses(Code.Unauthenticated, Code.PermissionDenied),
  },
});

const restart = createRoute({
  method: "post",
  path: "/api/v1/plugins/{name}/restart",
  summary:
    "Restart an external plugin on this server: out of the gave-up state with a fresh restart budget, or a running process replaced " +
    "(its calls in flight fail as retryable and their steps retry). Answers once the new process has started. " +
    'Plugins serve every tenant, so it needs the plugin_restart permission everywhere (tenant, application and environment "*"); audited as plugin_restart',
  tags: ["plugins"],
  request: {
    params: z.object({
      name: z
        .string()
        .max(63)
        .regex(/^[a-z0-9][a-z0-9-]*$/, "plugin names are lower-case letters, digits and '-'")
        .describe("the plugin's name under plugins in manent.yml"),
    }),
  },
  responses: {
    200: { description: "the plugin after its restart", content: { "application/json": { schema: pluginSchema } } },
    ...errorResponses(
      Code.InvalidArgument,
      Code.Unauthenticated,
      Code.PermissionDenied,
      Code.NotFound,
      Code.FailedPrecondition,
      Code.DeadlineExceeded,
      Code.Unavailable,
    ),
  },
});

export function pluginRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(list, async (c) => {
    // Plugins belong to no tenant: anyone who may read something may list them.
    if (scopesFor(c.get("caller"), "read").length === 0) authorize(c.get("caller"), "read", { tenant: "*" });
    return c.json({ plugins: await listPlugins(deps) }, 200);
  });

  app.openapi(restart, async (c) => {
    const { name } = c.req.valid("param");
    const caller = c.get("caller");
    await audited(c, "plugin_restart", { tenant: null, subject: `plugin ${name}` }, async () => {
      // Server-wide: a plugin's process serves every tenant's deploys, so only a grant over all of them allows it.
      authorize(caller, "plugin_restart", { tenant: "*", application: "*", environment: "*" });
      const plugin = deps.plugins.get(name);
      if (!plugin)
        throw new ManentError(Code.NotFound, `no plugin ${name} (configured: ${deps.plugins.names().join(", ") || "none"})`, {
          details: { plugin: name },
        });
      if (!plugin.restart)
        throw new ManentError(
          Code.FailedPrecondition,
          `plugin ${name} is built in: it runs inside the server, there is no process to restart`,
          {
            details: { plugin: name },
          },
        );
      await plugin.restart();
      // What the new process announced at its Configure, so the listing shows it at once.
      await deps.store.saveCapabilities(name, await plugin.capabilities());
    });
    const listed = (await listPlugins(deps)).find((p) => p.name === name)!;
    return c.json(listed, 200);
  });
}

/** Plugins and their capabilities, without starting external processes: theirs are as of their last start. */
async function listPlugins(deps: ApiDeps) {
  const known = await deps.store.loadCapabilities();
  return Promise.all(
    deps.plugins.list().map(async (p) => {
      if (p.kind === "builtin") return { name: p.name, kind: p.kind, capabilities: capabilitiesOf(await p.deployer()) as string[] };
      const seen = known.get(p.name);
      const supervision = p.supervision?.();
      // This server's process when it has started one (a capability check is a start too), else what the fleet last recorded.
      const live = supervision?.capabilities ?? null;
      return {
        name: p.name,
        kind: p.kind,
        capabilities: (live ?? seen?.capabilities ?? null) as string[] | null,
        capabilities_as_of: live ? supervision!.last_start : (seen?.updated_at ?? null),
        ...(supervision && {
          status: supervision.status,
          restarts: supervision.restarts,
          last_start: supervision.last_start,
          last_error: supervision.last_error,
        }),
      };
    }),
  );
}
