import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import type { Logger } from "../core/contract/index.js";
import { clientAddress } from "./audit.js";
import type { HttpMetrics } from "./http-metrics.js";

/** The header a request id travels in, both ways (as most proxies and tracers name it). */
export const requestIdHeader = "x-request-id";

/**
 * A client's own id is kept when it is a plain token of reasonable length (a UUID, a trace id);
 * anything else (empty, too long, a header-splitting or log-forging character) gets a new one.
 */
const acceptableRequestId = /^[A-Za-z0-9._:@=+/-]{1,128}$/;

/** The request context's variable the id is kept in (part of the API's ApiEnv). */
export interface RequestIdEnv {
  Variables: { requestId: string };
}

/** What the log lines written while a request is handled carry (pino's mixin reads it). */
export interface RequestFields {
  request_id: string;
}

/**
 * The request each log line belongs to: an AsyncLocalStorage per server (not per process), so the
 * lines an engine call or a store query writes for a request name it without being passed it.
 */
export class RequestLog {
  private readonly storage = new AsyncLocalStorage<RequestFields>();

  /** The fields of the request being handled, when there is one. */
  fields(): RequestFields | undefined {
    return this.storage.getStore();
  }

  run<T>(fields: RequestFields, fn: () => T): T {
    return this.storage.run(fields, fn);
  }
}

/** The request id of a request: the client's `X-Request-Id` when acceptable, else a new UUID. */
export function requestIdOf(sent: string | undefined): string {
  const id = sent?.trim();
  return id !== undefined && acceptableRequestId.test(id) ? id : randomUUID();
}

/** Paths a probe or a scraper asks every few seconds: their access lines are at debug level. */
const probePaths = new Set(["/livez", "/readyz", "/healthz", "/metrics"]);

/**
 * Every request: its id (taken or made) on the answer's `X-Request-Id` and on every log line written
 * while it is handled, one access line when it ends (method, path without the query, route, status,
 * duration; never a header, a cookie or the query, which may hold a token or a code), and the HTTP
 * metrics by route.
 */
export function requestLogging<E extends RequestIdEnv>(o: {
  requests: RequestLog;
  logger: Logger;
  metrics: HttpMetrics;
}): MiddlewareHandler<E> {
  return async (c, next) => {
    const requestId = requestIdOf(c.req.header(requestIdHeader));
    c.set("requestId", requestId);
    // Before the handler: every answer made through the context carries it, and none is touched
    // after it is made (an event stream writes its headers to the socket itself, routes/events.ts).
    c.header(requestIdHeader, requestId);
    const started = performance.now();
    await o.requests.run({ request_id: requestId }, async () => {
      try {
        await next();
      } finally {
        const seconds = (performance.now() - started) / 1000;
        const route = matchedRoute(c);
        o.metrics.observe(c.req.method, route, c.res.status, seconds);
        const line = {
          method: c.req.method,
          path: c.req.path,
          route,
          status: c.res.status,
          duration_ms: Math.round(seconds * 1000),
          client_address: clientAddress(c),
        };
        if (probePaths.has(c.req.path)) o.logger.debug("request", line);
        else o.logger.info("request", line);
      }
    });
  };
}

/**
 * The route a request matched, as registered ("/api/v1/deploys/:id"): a bounded set, fit for a
 * metric label. A request no route took (a 404) is "unmatched", not its path.
 */
function matchedRoute(c: Context): string {
  // After next(): the route of the handler that answered.
  const path = routePath(c);
  return path === "" || path === "*" || path.endsWith("/*") ? "unmatched" : path;
}
