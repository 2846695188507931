import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import type { DeployEvent } from "../../core/engine/deploy-events.js";
import { Code, ManentError } from "../../core/errors.js";
import type { EventFilter } from "../../storage/pg-event-hub.js";
import { deployIdParams, errorResponses } from "../api-schemas.js";
import type { ApiApp, ApiDeps, ApiEnv } from "../http-api.js";
import { nameQuery, visibleDeploy } from "./deploys.js";
import { scopesFor } from "../identity/index.js";

/** Comment lines that keep idle streams open through proxies; they carry no data. */
const keepAliveMs = 15_000;
const pageSize = 500;

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

export function eventRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(deployEvents, async (c) => {
    const { id } = c.req.valid("param");
    await visibleDeploy(deps, c.get("caller"), id);
    const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").after) ?? 0;
    return stream(c, deps, { deployId: id }, after) as never;
  });

  app.openapi(tenantEvents, async (c) => {
    const q = c.req.valid("query");
    const scopes = scopesFor(c.get("caller"), "read");
    // Live only: from where the hub stands (what it reads next goes to the new subscription), no query.
    const after = resumePoint(c.req.valid("header")["last-event-id"], q.after) ?? deps.events.position;
    return stream(c, deps, { tenant: q.tenant ?? "*", scopes }, after) as never;
  });
}

export function resumePoint(lastEventId: string | undefined, after: number | undefined): number | undefined {
  if (lastEventId !== undefined) return Number(lastEventId);
  return after;
}

/**
 * Sends the events after `after` that match, then new ones as the hub delivers them, in id order
 * and each once: the subscription starts before the backlog is read, so nothing falls between.
 * A stream resuming from a recent event (a client reconnecting) gets its backlog from the hub's
 * memory, taken in the same tick as the subscription; an older one reads the database. Events
 * waiting in the queue are written together, each event's JSON made once for every stream.
 */
export function stream(c: Context<ApiEnv>, deps: ApiDeps, filter: EventFilter, after: number): Response {
  return streamSSE(
    c,
    async (out) => {
      const queue: DeployEvent[] = [];
      let ended = false;
      let wake: (() => void) | undefined;
      const end = (): void => {
        ended = true;
        wake?.();
      };
      const unsubscribe = deps.events.subscribe(
        filter,
        (e) => {
          queue.push(e);
          wake?.();
        },
        end,
      );
      const recent = deps.events.recentAfter(after, filter);
      out.onAbort(end);
      let last = after;
      /** Writes the events not sent yet, in one write (the format of hono's writeSSE: data, then id). */
      const send = async (events: DeployEvent[]): Promise<void> => {
        let text = "";
        for (const e of events) {
          if (e.id <= last) continue;
          text += `data: ${deps.events.toJson(e)}\nid: ${e.id}\n\n`;
          last = e.id;
        }
        if (text) await out.write(text);
      };
      try {
        if (recent) await send(recent);
        else
          for (;;) {
            const page = await deps.events.read(last, filter, pageSize);
            await send(page);
            if (page.length < pageSize) break;
          }
        while (!ended && !out.aborted) {
          // Again until empty: what arrives during a write has no wake to call yet.
          while (queue.length > 0 && !out.aborted) await send(queue.splice(0));
          await idle(out, (w) => (wake = w));
          wake = undefined;
        }
      } finally {
        unsubscribe();
      }
    },
    async (err) => {
      deps.logger.warn("event stream failed", { error: ManentError.from(err).message });
    },
  );
}

/** Waits for the next event (or the end), writing a keep-alive comment when the stream has been quiet. */
async function idle(out: SSEStreamingApi, setWake: (wake: () => void) => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const woken = await new Promise<boolean>((resolve) => {
    setWake(() => resolve(true));
    timer = setTimeout(() => resolve(false), keepAliveMs);
  });
  clearTimeout(timer);
  if (!woken && !out.aborted) await out.write(": keep-alive\n\n");
}
