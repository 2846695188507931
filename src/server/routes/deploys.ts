import { createRoute, z } from "@hono/zod-openapi";
import { finishEventTypes, isFinishEvent } from "../../core/engine/deploy-events.js";
import { terminalStatuses, type DeployRecord } from "../../core/engine/deploy-store.js";
import type { Submission } from "../../core/engine/resolve.js";
import { Code, ManentError } from "../../core/errors.js";
import {
  deployIdParams,
  deployStatus,
  cancelledSchema,
  deploySchema,
  deploySummarySchema,
  errorResponses,
  rollbackBodySchema,
  submitBodySchema,
  submittedSchema,
  windowOverrideBodySchema,
} from "../api-schemas.js";
import { audited, auditedWithin, record } from "../audit.js";
import { authorize, mayRead, type Principal } from "../../core/identity/index.js";
import { deployScope, descriptorScope, scopesFor } from "../identity/index.js";
import type { ApiApp, ApiDeps } from "../api-deps.js";

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { "application/json": { schema } } });
const jsonBody = <S extends z.ZodType>(schema: S) => ({ required: true, content: { "application/json": { schema } } });

const submit = createRoute({
  method: "post",
  path: "/api/v1/deploys",
  summary: "Submit a deploy (or a dry-run) of what a descriptor describes",
  tags: ["deploys"],
  request: { body: jsonBody(submitBodySchema) },
  responses: {
    202: json(submittedSchema, "queued"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.Unavailable),
  },
});

const rollback = createRoute({
  method: "post",
  path: "/api/v1/rollbacks",
  summary: "Return an application's environment to an earlier release, without fetching anything",
  tags: ["deploys"],
  request: { body: jsonBody(rollbackBodySchema) },
  responses: {
    202: json(submittedSchema, "queued"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.FailedPrecondition, Code.Unavailable),
  },
});

// Query values reach Postgres: names as the descriptor allows them, so "%00" or a megabyte is a 400.
export const nameQuery = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, "must be lower-case letters, digits, '.', '_' or '-'")
  .optional();
const listQuery = z.object({
  tenant: nameQuery.describe("only this tenant (a caller sees only what its grants let it read, whatever it asks)"),
  application: nameQuery,
  environment: nameQuery,
  artifact: nameQuery,
  status: deployStatus.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

const list = createRoute({
  method: "get",
  path: "/api/v1/deploys",
  summary: "List deploys, newest first",
  tags: ["deploys"],
  request: { query: listQuery },
  responses: {
    200: json(z.object({ deploys: z.array(deploySummarySchema) }), "deploys"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

const get = createRoute({
  method: "get",
  path: "/api/v1/deploys/{id}",
  summary: "One deploy with its steps and targets",
  tags: ["deploys"],
  request: {
    params: deployIdParams,
    query: z.object({
      wait: z.coerce.number().min(0).max(300).default(0).describe("answer once the deploy has ended, or after this many seconds"),
    }),
  },
  responses: {
    200: json(deploySchema, "the deploy"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound),
  },
});

const cancel = createRoute({
  method: "post",
  path: "/api/v1/deploys/{id}/cancel",
  summary: "Cancel a queued or running deploy",
  tags: ["deploys"],
  request: { params: deployIdParams },
  responses: {
    200: json(cancelledSchema, "the deploy, and what the cancel does"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.FailedPrecondition),
  },
});

const overrideWindow = createRoute({
  method: "post",
  path: "/api/v1/deploys/{id}/window-override",
  summary: "Start a deploy that waits for its deploy window now, whatever the windows and freezes say",
  description:
    "Admins only (the window_override permission on the deploy's tenant, application and environment); the reason is kept in the " +
    "audit log (action window_override). Refused (412) for a deploy that is not queued waiting for a window, or was overridden already.",
  tags: ["deploys"],
  request: { params: deployIdParams, body: jsonBody(windowOverrideBodySchema) },
  responses: {
    200: json(deploySchema, "the deploy, as it is when the override is recorded"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.FailedPrecondition),
  },
});

const retry = createRoute({
  method: "post",
  path: "/api/v1/deploys/{id}/retry",
  summary: "Retry a failed, rolled back or cancelled deploy: a new deploy of the same artifact (same sha256) with the same settings",
  description:
    "The new deploy has the retried one's descriptor and overrides, the artifact pinned by the sha256 of the bytes it fetched, and the " +
    "settings it resolved from its envconfig at the time (not today's file; today's when it ended before resolving). Its record " +
    "names the retried deploy (`retry_of`); the retried one lists it (`retried_by`). Needs the submit permission; a deploy that is " +
    "queued, running or succeeded is refused (412, as a cancel of an ended deploy is), and so is an artifact that can no longer be fetched.",
  tags: ["deploys"],
  request: { params: deployIdParams },
  responses: {
    202: json(submittedSchema, "the retry, queued"),
    ...errorResponses(
      Code.InvalidArgument,
      Code.Unauthenticated,
      Code.PermissionDenied,
      Code.NotFound,
      Code.FailedPrecondition,
      Code.Unavailable,
    ),
  },
});

export function deployRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(submit, async (c) => {
    const body = c.req.valid("json");
    const caller = c.get("caller");
    const scope = descriptorScope(body.descriptor);
    const action = body.dry_run ? "dry_run" : "submit";
    const override = body.window_override && !body.dry_run ? body.window_override : undefined;
    const submission: Submission = {
      kind: body.dry_run ? "dry_run" : "deploy",
      descriptor: body.descriptor,
      descriptorFile: body.descriptor_file,
      overrides: dropUndefined(body.overrides),
      ...(override && { window_override: { reason: override.reason, by: submitter(caller).name } }),
    };
    const out = await auditedWithin(c, action, { ...scope }, async (audit) => {
      authorize(caller, action, scope);
      // Overriding the deploy windows is an admin's: a deployer is refused (403) and nothing is queued.
      if (override) authorize(caller, "window_override", scope);
      return deps.engine.submit(submission, submitter(caller), { audit });
    });
    if (override) await record(c, "window_override", { ...scope, deployId: out.id }, "ok", override.reason);
    return c.json({ ...out, status: "queued" as const }, 202);
  });

  app.openapi(rollback, async (c) => {
    const body = c.req.valid("json");
    const caller = c.get("caller");
    const scope = descriptorScope(body.descriptor);
    const submission: Submission = {
      kind: "rollback",
      descriptor: body.descriptor,
      descriptorFile: body.descriptor_file,
      ...(body.to !== undefined && { to: body.to }),
    };
    const out = await auditedWithin(c, "rollback", { ...scope }, async (audit) => {
      authorize(caller, "rollback", scope);
      return deps.engine.submit(submission, submitter(caller), { audit });
    });
    return c.json({ ...out, status: "queued" as const }, 202);
  });

  app.openapi(retry, async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const deploy = await visibleDeploy(deps, caller, id);
    const out = await auditedWithin(c, "retry", { ...deployScope(deploy), subject: `retry of deploy ${id}` }, async (audit) => {
      authorize(caller, "submit", deployScope(deploy));
      return deps.engine.retry(id, submitter(caller), { audit });
    });
    return c.json({ ...out, status: "queued" as const }, 202);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const deploys = await deps.store.listDeploys({
      scopes: scopesFor(c.get("caller"), "read"),
      ...(q.tenant !== undefined && { tenant: q.tenant }),
      ...(q.application !== undefined && { application: q.application }),
      ...(q.environment !== undefined && { environment: q.environment }),
      ...(q.artifact !== undefined && { artifact: q.artifact }),
      ...(q.status !== undefined && { status: q.status }),
      limit: q.limit,
    });
    return c.json({ deploys }, 200);
  });

  app.openapi(get, async (c) => {
    const { id } = c.req.valid("param");
    const { wait } = c.req.valid("query");
    const read = () => visibleDeploy(deps, c.get("caller"), id);
    return c.json(wait > 0 ? await waitForEnd(deps, id, wait * 1000, c.req.raw.signal, read) : await read(), 200);
  });

  app.openapi(cancel, async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const deploy = await visibleDeploy(deps, caller, id);
    const cancel = await audited(c, "cancel", { ...deployScope(deploy), deployId: id }, async () => {
      authorize(caller, "cancel", deployScope(deploy));
      return deps.engine.cancel(id, caller.name);
    });
    return c.json({ ...(await deps.store.getDeploy(id))!, cancel }, 200);
  });

  app.openapi(overrideWindow, async (c) => {
    const { id } = c.req.valid("param");
    const { reason } = c.req.valid("json");
    const caller = c.get("caller");
    const deploy = await visibleDeploy(deps, caller, id);
    await audited(c, "window_override", { ...deployScope(deploy), deployId: id, subject: reason }, async () => {
      authorize(caller, "window_override", deployScope(deploy));
      await deps.engine.overrideWindow(id, { reason, by: submitter(caller).name });
    });
    return c.json((await deps.store.getDeploy(id))!, 200);
  });
}

/**
 * `?wait=`: the deploy once its finishing event arrives (from whichever server ran it), or as it is
 * when the wait is over or the client has gone. Subscribed before the first read (`read`, which
 * also refuses a deploy the caller may not see), so an end between the two is not missed; the
 * deploy is read once more after its end.
 */
async function waitForEnd(
  deps: ApiDeps,
  id: string,
  ms: number,
  signal: AbortSignal,
  read: () => Promise<DeployRecord>,
): Promise<DeployRecord> {
  let timer: NodeJS.Timeout | undefined;
  let unsubscribe = (): void => undefined;
  const ended = new Promise<void>((resolve) => {
    unsubscribe = deps.events.subscribe({ deployId: id, types: finishEventTypes }, (e) => isFinishEvent(e) && resolve(), resolve);
    timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  try {
    const now = await read();
    if (terminalStatuses.has(now.status)) return now;
    await ended;
    return (await deps.store.getDeploy(id)) ?? now;
  } finally {
    clearTimeout(timer);
    unsubscribe();
  }
}

/** A deploy the caller may read; one it may not is reported as missing, not forbidden: its existence is not the caller's business. */
export async function visibleDeploy(deps: ApiDeps, caller: Principal, id: string) {
  const deploy = await deps.store.getDeploy(id);
  if (!deploy || !mayRead(caller, deployScope(deploy))) throw new ManentError(Code.NotFound, `deploy ${id} not found`);
  return deploy;
}

/** Who a deploy records as its submitter: the name people read and the id separation of duties compares. */
function submitter(caller: Principal): { name: string; id: string } {
  return { name: caller.name, id: caller.id };
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
