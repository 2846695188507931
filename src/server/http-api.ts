import type { IncomingMessage, ServerResponse } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { getCookie } from "hono/cookie";
import { HTTPException } from "hono/http-exception";
import { invalidInput } from "../core/config/index.js";
import { Code, ManentError } from "../core/errors.js";
import { clientAddress, record } from "./audit.js";
import { httpStatus } from "./http-status.js";
import { requestLogging } from "./request-log.js";
import { csrfProtection } from "./oidc/csrf.js";
import { databaseUnavailable, isDatabaseUnavailable, looksLikeConnectionLoss } from "../storage/database-health.js";
import { EventStreams } from "./event-streams.js";
import { registerRoutes, publicApiPaths } from "./routes/index.js";
import { uploadsPathPattern } from "./routes/uploads.js";
import { SignInRefusals } from "./sign-in-refusals.js";

import type { ApiApp, ApiDeps, ApiEnv } from "./api-deps.js";

export type { ApiApp, ApiDeps, ApiEnv };

/** Request bodies larger than this are refused before they are read whole. */
export const maxBodyBytes = 1 << 20;

/** Which part of the request a validation failure names in its message. */
const requestParts: Record<string, string> = {
  json: "request body",
  query: "query",
  param: "path",
  header: "header",
  form: "request body",
};

/**
 * The HTTP API on Hono: every route is declared with zod schemas (see routes/index.ts), which both
 * validate requests and make the OpenAPI document. Errors are `{"error": {code, message, details}}`
 * with the HTTP status of their code (http-status.ts); `/api/v1/` routes need a bearer token.
 */
export function createApiApp(deps: ApiDeps): ApiApp {
  const refusals = new SignInRefusals();
  const app: ApiApp = new OpenAPIHono<ApiEnv>({
    defaultHook: (result) => {
      if (!result.success) throw invalidInput(result.error, requestParts[result.target] ?? result.target);
    },
  });

  app.onError((err, c) => {
    deps.database?.noticed(err);
    let e = isDatabaseUnavailable(err) ? databaseUnavailable(err) : toManentError(err);
    // An unexpected error that looks like a lost connection (DBOS's own pools) asks for a retry, without marking the database away.
    if ((e.code === Code.Internal || e.code === Code.Unknown) && looksLikeConnectionLoss(err)) e = databaseUnavailable(err);
    if (e.code === Code.Internal || e.code === Code.Unknown) deps.logger.error("request failed", { path: c.req.path, error: e.message });
    return c.json({ error: { ...e.toJSON(), request_id: c.get("requestId") } }, httpStatus(e.code) as 500);
  });
  app.notFound((c) => {
    throw new ManentError(Code.NotFound, `no route ${c.req.method} ${c.req.path}`);
  });

  const jsonBodyLimit = bodyLimit({
    maxSize: maxBodyBytes,
    // The rest of the body is not read: the connection is closed so the client does not reuse it mid-upload.
    onError: (c) =>
      c.json(
        { error: { ...new ManentError(Code.InvalidArgument, "request body: larger than 1 MiB").toJSON(), request_id: c.get("requestId") } },
        400,
        { connection: "close" },
      ),
  });
  // First: every answer and every log line of a request carry its id, and each request gets its access line.
  // Made at the first request: building the app for its OpenAPI document uses none of the API's dependencies.
  let logging: MiddlewareHandler<ApiEnv> | undefined;
  app.use("*", (c, next) =>
    (logging ??= requestLogging<ApiEnv>({ requests: deps.requests, logger: deps.logger, metrics: deps.http }))(c, next),
  );
  // An artifact upload is streamed to disk under its own limit (artifacts.max_upload_size).
  app.use("*", (c, next) => (uploadsPathPattern.test(c.req.path) ? next() : jsonBodyLimit(c, next)));
  app.use("*", async (c, next) => {
    // Read when used, so a route that needs neither (the OpenAPI document) works without them.
    c.set("services", {
      get audit() {
        return deps.audit;
      },
      get logger() {
        return deps.logger;
      },
    });
    await next();
  });
  // Before the authenticator: a change riding on the session cookie must come from manent's own pages.
  app.use("/api/v1/*", csrfProtection());
  app.use("/auth/logout", csrfProtection());
  app.use("/api/v1/*", async (c, next) => {
    if (!publicApiPaths.has(c.req.path)) {
      try {
        c.set("caller", await deps.auth.authenticate({ authorization: c.req.header("authorization"), cookies: getCookie(c) }));
      } catch (err) {
        const address = clientAddress(c);
        const decision = refusals.take(address);
        if (decision.record) {
          const leftOut =
            decision.leftOut > 0 ? ` (and ${decision.leftOut} earlier refusals from this address not recorded one by one)` : "";
          await record(
            c,
            "sign_in",
            { tenant: null },
            "unauthenticated",
            `${ManentError.from(err).message} (${c.req.method} ${c.req.path})${leftOut}`,
          );
        } else if (decision.startsLeavingOut) {
          deps.logger.warn("refused sign-ins from one address over the audit limit: counted, not recorded one by one", {
            client_address: address,
          });
        }
        throw err;
      }
    }
    if (!publicApiPaths.has(c.req.path)) deps.database?.assertAvailable();
    await next();
  });

  // Made at the first stream, not here: building the app (for its OpenAPI document) uses none of the API's dependencies.
  let streams: EventStreams | undefined;
  registerRoutes(app, deps, () => (streams ??= new EventStreams(deps.events, deps.logger)));
  return app;
}

/** The API as a node:http request listener. */
export function createApiHandler(deps: ApiDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const app = createApiApp(deps);
  const listener = getRequestListener(app.fetch);
  return (req, res) => void listener(req, res);
}

function toManentError(err: unknown): ManentError {
  if (err instanceof HTTPException) {
    // Hono's own refusals (malformed JSON, wrong content type) are the caller's mistakes.
    if (err.status === 415) return new ManentError(Code.InvalidArgument, "request body: content-type must be application/json");
    if (err.status === 400)
      return new ManentError(Code.InvalidArgument, /json/i.test(err.message) ? "request body: not valid JSON" : err.message);
    if (err.status === 413) return new ManentError(Code.InvalidArgument, "request body: larger than 1 MiB");
    return new ManentError(err.status >= 500 ? Code.Internal : Code.InvalidArgument, err.message);
  }
  return ManentError.from(err, Code.Internal);
}
