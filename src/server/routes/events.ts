import type { ServerResponse } from "node:http";
import { createRoute, z } from "@hono/zod-openapi";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { requestIdHeader } from "../request-log.js";
import type { Context } from "hono";
import { Code } from "../../core/errors.js";
import type { EventFilter } from "../../storage/pg-event-hub.js";
import { deployIdParams, errorResponses } from "../api-schemas.js";
import type { EventStreams } from "../event-streams.js";
import type { ApiApp, ApiDeps, ApiEnv } from "../api-deps.js";
import { nameQuery, visibleDeploy } from "./deploys.js";
import { scopesFor } from "../identity/index.js";

export const resumeHeaders = z.object({
  "last-event-id": z
    .string()
    .regex(/^\d{1,18}$/, "not an event id")
    .optional()
    .describe("resume after this event (sent by SSE clients on reconnect)"),
});
export const sse = {
  description:
    "text/event-stream: each message has `id:` (the event's sequence number, for Last-Event-ID) and `data:` (the event as JSON: id, at, tenant, deploy_id, type, data)",
  content: { "text/event-stream": { schema: z.string() } },
};

const deployEvents = createRoute({
  method: "get",
  path: "/api/v1/deploys/{id}/events",
  summary: "Server-sent events of one deploy: its whole history first (or what follows Last-Event-ID / after), then live",
  tags: ["events"],
  request: {
    params: deployIdParams,
    headers: resumeHeaders,
    query: z.object({
      after: z.coerce.number().int().min(0).optional().describe("start after this event id (default 0: from the deploy's start)"),
    }),
  },
  responses: { 200: sse, ...errorResponses(Code.InvalidArgument, Code.Unauthenticated, Code.NotFound) },
});

const tenantEvents = createRoute({
  method: "get",
  path: "/api/v1/events",
  summary: "Server-sent events of every deploy the caller may read: live, or from Last-Event-ID / after",
  tags: ["events"],
  request: {
    headers: resumeHeaders,
    query: z.object({
      tenant: nameQuery.describe("only this tenant (a caller gets only the deploys it may read, whatever it asks)"),
      after: z.coerce.number().int().min(0).optional().describe("start after this event id (default: only new events)"),
    }),
  },
  responses: { 200: sse, ...errorResponses(Code.InvalidArgument, Code.Unauthenticated) },
});

export function eventRoutes(app: ApiApp, deps: ApiDeps, streams: () => EventStreams): void {
  app.openapi(deployEvents, async (c) => {
    const { id } = c.req.valid("param");
    await visibleDeploy(deps, c.get("caller"), id);
    const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").after) ?? 0;
    return stream(c, streams(), { deployId: id }, after) as never;
  });

  app.openapi(tenantEvents, async (c) => {
    const q = c.req.valid("query");
    const scopes = scopesFor(c.get("caller"), "read");
    // Live only: from where the hub stands (what it reads next goes to the new subscription), no query.
    const after = resumePoint(c.req.valid("header")["last-event-id"], q.after) ?? deps.events.position;
    return stream(c, streams(), { tenant: q.tenant ?? "*", scopes }, after) as never;
  });
}

export function resumePoint(lastEventId: string | undefined, after: number | undefined): number | undefined {
  if (lastEventId !== undefined) return Number(lastEventId);
  return after;
}

/** The headers of an event stream (those of hono's streamSSE). */
const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

/**
 * Answers with the event stream of `filter` after `after` (see {@link EventStreams.open}), written
 * straight to the Node response: no web stream, encoder and reader per stream and per event. In
 * process (`app.request`, no Node response) the same text goes through a ReadableStream.
 */
export function stream(c: Context<ApiEnv>, streams: EventStreams, filter: EventFilter, after: number): Response {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  const headers = { ...sseHeaders, [requestIdHeader]: c.get("requestId") };
  if (outgoing) {
    outgoing.writeHead(200, headers);
    outgoing.flushHeaders();
    const close = streams.open(
      { write: (text) => outgoing.write(text), end: () => outgoing.end(), pending: () => outgoing.writableLength },
      filter,
      after,
    );
    outgoing.on("close", close);
    // A client that left while the request was authenticated: its close has already happened.
    if (!outgoing.socket || outgoing.socket.destroyed) close();
    return RESPONSE_ALREADY_SENT;
  }
  const encoder = new TextEncoder();
  let close = (): void => undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      close = streams.open({ write: (text) => controller.enqueue(encoder.encode(text)), end: () => controller.close() }, filter, after);
    },
    cancel: () => close(),
  });
  return new Response(body, { headers });
}
