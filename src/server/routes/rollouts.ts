import { createRoute, z } from "@hono/zod-openapi";
import { Code } from "../../core/errors.js";
import { sendRolloutCommand } from "../../core/rollout/rollout-commands.js";
import type { CommandName } from "../../core/rollout/rollout-state.js";
import type { Context } from "hono";
import { audited } from "../audit.js";
import { deployIdParams, deploySchema, errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps, ApiEnv } from "../api-deps.js";
import { visibleDeploy } from "./deploys.js";
import { authorize } from "../../core/identity/index.js";
import { deployScope } from "../identity/index.js";

const promoteBody = z
  .strictObject({ full: z.boolean().default(false).describe("skip every remaining step and gate, and promote now") })
  .openapi("PromoteRequest");

const commandRoute = (name: CommandName, summary: string) =>
  createRoute({
    method: "post",
    path: `/api/v1/deploys/{id}/${name}`,
    summary,
    tags: ["rollouts"],
    request: { params: deployIdParams },
    responses: {
      200: { description: "the deploy, with the command recorded", content: { "application/json": { schema: deploySchema } } },
      ...errorResponses(
        Code.InvalidArgument,
        Code.Unauthenticated,
        Code.PermissionDenied,
        Code.NotFound,
        Code.AlreadyExists,
        Code.FailedPrecondition,
      ),
    },
  });

const approve = commandRoute("approve", "Approve the approval step or gate the rollout waits at");
const abort = commandRoute("abort", "Abort the rollout now: weight 0, candidate reverted, earlier waves rolled back");
const promote = createRoute({
  ...commandRoute("promote", "End the current pause or approval; with full, skip every remaining step and gate and promote now"),
  request: { params: deployIdParams, body: { required: false, content: { "application/json": { schema: promoteBody } } } },
});

/** Operator commands on a running rollout, each its own permission where the deploy is, recorded on the deploy with the caller's name and the time. */
export function rolloutRoutes(app: ApiApp, deps: ApiDeps): void {
  const run = async (c: Context<ApiEnv>, id: string, command: CommandName, full = false) => {
    const caller = c.get("caller");
    const deploy = await visibleDeploy(deps, caller, id);
    await audited(c, command, { ...deployScope(deploy), deployId: id }, async () => {
      authorize(caller, command, deployScope(deploy));
      // A plain promote during an approval is its sender's approval: it needs the approve permission too.
      if (command === "promote" && !full && deploy.rollout?.waiting?.kind === "approval") authorize(caller, "approve", deployScope(deploy));
      // The approval's own requirements (approvers: groups, distinct people, not the submitter) are checked in there.
      await sendRolloutCommand(deps.store, deploy, command, { full, by: caller });
    });
    return (await deps.store.getDeploy(id))!;
  };
  app.openapi(approve, async (c) => c.json(await run(c, c.req.valid("param").id, "approve"), 200));
  app.openapi(abort, async (c) => c.json(await run(c, c.req.valid("param").id, "abort"), 200));
  app.openapi(promote, async (c) => {
    const body = c.req.valid("json") as z.output<typeof promoteBody> | undefined;
    return c.json(await run(c, c.req.valid("param").id, "promote", body?.full === true), 200);
  });
}
