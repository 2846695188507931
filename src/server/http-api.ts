import type { GitEnvconfigRepository } from "../net/git-envconfig-source.js";
import type { AutoDeployResult } from "../core/sync/auto-deploy.js";
import type { EnvconfigHeads } from "../core/environments/overview.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { OpenAPIHono } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { getCookie } from "hono/cookie";
import { HTTPException } from "hono/http-exception";
import type { Registry } from "prom-client";
import type { Logger } from "../core/contract/index.js";
import { invalidInput, type LoadedConfig } from "../core/config/index.js";
import type { DeployStore } from "../core/engine/deploy-store.js";
import type { Engine } from "../core/engine/engine.js";
import type { OverviewSource } from "../core/environments/overview.js";
import type { DriftChecker, DriftStore } from "../core/drift/index.js";
import type { Releases } from "../core/release/releases.js";
import type { ReleaseStore } from "../core/release/release-store.js";
import type { PluginRegistry } from "../core/engine/plugin-registry.js";
import { Code, ManentError } from "../core/errors.js";
import type { Principal } from "../core/identity/index.js";
import type { PgAuditLog } from "../storage/pg-audit-log.js";
import type { PgEventHub } from "../storage/pg-event-hub.js";
import type { PgSessionStore } from "../storage/pg-session-store.js";
import { clientAddress, record } from "./audit.js";
import type { Authenticator } from "./identity/index.js";
import { httpStatus } from "./http-status.js";
import { csrfProtection } from "./oidc/csrf.js";
import type { RelyingParty } from "./oidc/relying-party.js";
import { databaseUnavailable, isDatabaseUnavailable, looksLikeConnectionLoss, type DatabaseHealth } from "../storage/database-health.js";
import { EventStreams } from "./event-streams.js";
import { registerRoutes, publicApiPaths } from "./routes/index.js";
import { uploadsPathPattern } from "./routes/uploads.js";
import { SignInRefusals } from "./sign-in-refusals.js";
import type { ManagedTokens } from "./tokens/managed-tokens.js";
import type { UploadDeps } from "./uploads.js";

export interface ApiDeps {
  engine: Engine;
  /** Releases through environments (src/core/release). */
  releases: Releases;
  releaseStore: ReleaseStore;
  store: DeployStore;
  /** What runs where (routes/overview.ts). */
  overview: OverviewSource;
  plugins: PluginRegistry;
  auth: Authenticator;
  /** Managed API tokens (routes/tokens.ts). */
  tokens: ManagedTokens;
  metrics: Registry;
  logger: Logger;
  /** Checks the database for /healthz. */
  ping: () => Promise<void>;
  /** Where clients' uploaded artifacts go, and how large one may be. */
  uploads: UploadDeps;
  /** The event log's live feed (LISTEN/NOTIFY) and reader. */
  events: PgEventHub;
  audit: PgAuditLog;
  /** The git envconfig providers, refreshed on demand (routes/envconfig.ts). */
  gitEnvconfig?: readonly GitEnvconfigRepository[];
  /** Where a deploy of a key would read its envconfig now, for the overview's `envconfig` of each cell. */
  envconfigHeads?: EnvconfigHeads;
  /** Deploys what changed in the envconfig of environments that opt in, after a refresh. */
  autoDeploy?: { run(): Promise<AutoDeployResult[]> };
  /** Drift records and on-demand checks. */
  drift: { store: DriftStore; checker: DriftChecker };
  /** Sign-in with OpenID Connect (auth.oidc), when configured. */
  oidc?: { relyingParty: RelyingParty; sessions: PgSessionStore; config: LoadedConfig };
  /** While the database is away, `/api/v1/` answers 503 `unavailable` at once. */
  database?: DatabaseHealth;
}

/** What a handler finds in the request context: the authenticated caller of an `/api/v1/` route. */
export interface ApiEnv {
  Variables: { caller: Principal; services: { audit: PgAuditLog; logger: Logger } };
}
export type ApiApp = OpenAPIHono<ApiEnv>;

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
    return c.json({ error: e.toJSON() }, httpStatus(e.code) as 500);
  });
  app.notFound((c) => {
    throw new ManentError(Code.NotFound, `no route ${c.req.method} ${c.req.path}`);
  });

  const jsonBodyLimit = bodyLimit({
    maxSize: maxBodyBytes,
    // The rest of the body is not read: the connection is closed so the client does not reuse it mid-upload.
    onError: (c) =>
      c.json({ error: new ManentError(Code.InvalidArgument, "request body: larger than 1 MiB").toJSON() }, 400, { connection: "close" }),
  });
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
