import { randomUUID } from "node:crypto";
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { Code, ManentError } from "../../core/errors.js";
import { authorize, canSomewhereIn, mayRead, refusal, type Action, type AuditAction, type Principal } from "../../core/identity/index.js";
import type { ReleaseRecord } from "../../core/release/release-store.js";
import { errorResponses } from "../api-schemas.js";
import { audited } from "../audit.js";
import type { ApiApp, ApiDeps, ApiEnv } from "../api-deps.js";
import { scopesFor } from "../identity/index.js";
import type { EventStreams } from "../event-streams.js";
import {
  promoteReleaseBodySchema,
  releaseAnswerSchema,
  releaseIdParams,
  releaseListQuery,
  releaseRetriedSchema,
  releaseSchema,
  releaseSummarySchema,
  startReleaseBodySchema,
} from "../release-schemas.js";
import { nameQuery } from "./deploys.js";
import { resumeHeaders, resumePoint, sse, stream } from "./events.js";

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { "application/json": { schema } } });
const jsonBody = <S extends z.ZodType>(schema: S) => ({ required: true, content: { "application/json": { schema } } });
const commandErrors = errorResponses(
  Code.InvalidArgument,
  Code.Unauthenticated,
  Code.PermissionDenied,
  Code.NotFound,
  Code.AlreadyExists,
  Code.FailedPrecondition,
);

const start = createRoute({
  method: "post",
  path: "/api/v1/releases",
  summary: "Start a release: the same artifact, pinned by sha256, through every stage of the application's pipeline.yml",
  tags: ["releases"],
  request: { body: jsonBody(startReleaseBodySchema) },
  responses: {
    202: json(z.object({ id: z.string(), status: z.literal("running") }).openapi("ReleaseStarted"), "started"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.Unavailable),
  },
});

const list = createRoute({
  method: "get",
  path: "/api/v1/releases",
  summary: "List releases, newest first",
  tags: ["releases"],
  request: { query: releaseListQuery(nameQuery) },
  responses: {
    200: json(z.object({ releases: z.array(releaseSummarySchema) }), "releases"),
    ...errorResponses(Code.InvalidArgument, Code.Unauthenticated),
  },
});

const get = createRoute({
  method: "get",
  path: "/api/v1/releases/{id}",
  summary: "One release with its stages, their deploys, soaks, approvals and measurements",
  tags: ["releases"],
  request: { params: releaseIdParams },
  responses: { 200: json(releaseSchema, "the release"), ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound) },
});

const events = createRoute({
  method: "get",
  path: "/api/v1/releases/{id}/events",
  summary: "Server-sent events of one release (release.created, release.status, release.updated): its history first, then live",
  tags: ["releases"],
  request: {
    params: releaseIdParams,
    headers: resumeHeaders,
    query: z.object({ after: z.coerce.number().int().min(0).optional().describe("start after this event id (default 0)") }),
  },
  responses: { 200: sse, ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound) },
});

const cancel = createRoute({
  method: "post",
  path: "/api/v1/releases/{id}/cancel",
  summary: "Cancel a release: the deploy it runs is cancelled too, later stages are never started",
  tags: ["releases"],
  request: { params: releaseIdParams },
  responses: { 200: json(releaseAnswerSchema, "the release, and what the cancel does"), ...commandErrors },
});

const approve = createRoute({
  method: "post",
  path: "/api/v1/releases/{id}/approve",
  summary: "Approve the stage the release waits at (its approvers rules apply: groups, count, not the submitter)",
  tags: ["releases"],
  request: { params: releaseIdParams },
  responses: { 200: json(releaseAnswerSchema, "the release"), ...commandErrors },
});

const promote = createRoute({
  method: "post",
  path: "/api/v1/releases/{id}/promote",
  summary: "Promote a release waiting at a manual stage into that stage",
  tags: ["releases"],
  request: { params: releaseIdParams, body: jsonBody(promoteReleaseBodySchema) },
  responses: { 200: json(releaseAnswerSchema, "the release"), ...commandErrors },
});

const retry = createRoute({
  method: "post",
  path: "/api/v1/releases/{id}/retry",
  summary: "Retry a failed or cancelled release: a new release of the same artifact (same sha256) from the stage where it stopped",
  description:
    "The new release goes through the pipeline the retried one recorded (not today's pipeline.yml), with the artifact pinned by its " +
    "sha256. The stages it had passed are not deployed again: they are shown as done by the release that deployed them (`done_by`). " +
    "The stage where it stopped and the later ones run as in any release (manual promotion, approval, deploy, soak, analysis), each " +
    "environment with its envconfig as it is then. The new release names the retried one (`retry_of`); the retried one lists it " +
    "(`retried_by`). Needs the submit permission in every environment of the pipeline, as a start does; a release that is running or " +
    "succeeded is refused (412), and so is an artifact that can no longer be fetched. A release is retried once: a second retry, " +
    "concurrent ones included, is refused 412 naming the retry that exists (`details.retried_by`); retry that one to go on.",
  tags: ["releases"],
  request: { params: releaseIdParams },
  responses: {
    202: json(releaseRetriedSchema, "the retry, started"),
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

/** Releases: started where the caller may submit to every environment of the pipeline; each command needs its permission where it acts. */
export function releaseRoutes(app: ApiApp, deps: ApiDeps, streams: () => EventStreams): void {
  app.openapi(start, async (c) => {
    const body = c.req.valid("json");
    const caller = c.get("caller");
    const id = randomUUID();
    const tenant = typeof body.descriptor.tenant === "string" ? body.descriptor.tenant : "untenanted";
    const application = typeof body.descriptor.application === "string" ? body.descriptor.application : undefined;
    await audited(c, "release_start", { tenant, ...(application && { application }), subject: `release ${id}` }, async () => {
      // Nothing about the pipeline is told to a caller who may not submit in the tenant at all.
      if (!canSomewhereIn(caller, "submit", tenant)) throw refusal(caller, "submit", { tenant });
      const plan = await deps.releases.plan({
        descriptor: body.descriptor,
        descriptorFile: body.descriptor_file,
        overrides: Object.fromEntries(Object.entries(body.overrides).filter(([, v]) => v !== undefined)),
      });
      for (const environment of plan.environments)
        authorize(caller, "submit", { tenant: plan.tenant, application: plan.application, environment });
      return deps.releases.start(plan, { name: caller.name, id: caller.id }, id);
    });
    return c.json({ id, status: "running" as const }, 202);
  });

  app.openapi(retry, async (c) => {
    const caller = c.get("caller");
    const r = await visibleRelease(deps, caller, c.req.valid("param").id);
    const id = randomUUID();
    const scope = {
      tenant: r.tenant,
      application: r.application,
      environment: r.environments.join(","),
      subject: `retry of release ${r.id}`,
    };
    const out = await audited(c, "release_retry", scope, async () => {
      // As a start: the submit permission in every environment of the pipeline.
      for (const environment of r.environments) authorize(caller, "submit", { tenant: r.tenant, application: r.application, environment });
      return deps.releases.retry(r, { name: caller.name, id: caller.id }, id);
    });
    return c.json({ id: out.id, status: "running" as const, retry_of: r.id, from_stage: out.from_stage }, 202);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid("query");
    const releases = await deps.releaseStore.listReleases({
      scopes: scopesFor(c.get("caller"), "read"),
      ...(q.tenant !== undefined && { tenant: q.tenant }),
      ...(q.application !== undefined && { application: q.application }),
      ...(q.status !== undefined && { status: q.status }),
      limit: q.limit,
    });
    return c.json({ releases }, 200);
  });

  app.openapi(get, async (c) => c.json(await visibleRelease(deps, c.get("caller"), c.req.valid("param").id), 200));

  app.openapi(events, async (c) => {
    const { id } = c.req.valid("param");
    await visibleRelease(deps, c.get("caller"), id);
    const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").after) ?? 0;
    return stream(c, streams(), { releaseId: id }, after) as never;
  });

  app.openapi(cancel, async (c) => {
    const r = await visibleRelease(deps, c.get("caller"), c.req.valid("param").id);
    const message = await act(c, r, "cancel", "release_cancel", here(r), () => deps.releases.cancel(r, c.get("caller").name));
    return c.json({ ...(await deps.releaseStore.getRelease(r.id))!, message }, 200);
  });

  app.openapi(approve, async (c) => {
    const r = await visibleRelease(deps, c.get("caller"), c.req.valid("param").id);
    const envs = r.waiting?.kind === "approval" ? r.waiting.environments : here(r);
    await act(c, r, "approve", "release_approve", envs, () => deps.releases.approve(r, c.get("caller")));
    return c.json((await deps.releaseStore.getRelease(r.id))!, 200);
  });

  app.openapi(promote, async (c) => {
    const { to } = c.req.valid("json");
    const r = await visibleRelease(deps, c.get("caller"), c.req.valid("param").id);
    if (!r.environments.includes(to)) {
      throw new ManentError(Code.InvalidArgument, `to: ${to} is not an environment of release ${r.id} (${r.environments.join(", ")})`, {
        details: { field: "to" },
      });
    }
    await act(c, r, "promote", "release_promote", [to], () => deps.releases.promote(r, to, c.get("caller")));
    return c.json((await deps.releaseStore.getRelease(r.id))!, 200);
  });
}

/** The environments of the stage a release is at (its first stage's before it started one). */
function here(r: ReleaseRecord): string[] {
  return r.stages[(r.current_stage ?? 1) - 1]?.environments ?? r.environments.slice(0, 1);
}

/** A command on a release, audited, after `action` is authorized in each of `environments`. */
async function act<T>(
  c: Context<ApiEnv>,
  r: ReleaseRecord,
  action: Action,
  audit: AuditAction,
  environments: string[],
  fn: () => Promise<T>,
): Promise<T> {
  const caller = c.get("caller");
  return audited(
    c,
    audit,
    { tenant: r.tenant, application: r.application, environment: environments.join(","), subject: `release ${r.id}` },
    async () => {
      for (const environment of environments) authorize(caller, action, { tenant: r.tenant, application: r.application, environment });
      return fn();
    },
  );
}

/** A release the caller may read (one of its environments); one it may not is reported missing, not forbidden. */
export async function visibleRelease(deps: ApiDeps, caller: Principal, id: string): Promise<ReleaseRecord> {
  const r = await deps.releaseStore.getRelease(id);
  if (!r || !r.environments.some((environment) => mayRead(caller, { tenant: r.tenant, application: r.application, environment })))
    throw new ManentError(Code.NotFound, `release ${id} not found`);
  return r;
}
