/**
 * Every route of manent-server's HTTP API, one module per resource.
 *
 * How to add a route (it is then validated AND documented in /api/v1/openapi.json, and
 * test/server/openapi.test.ts checks that every served route is documented and vice versa):
 *
 *   1. In the resource's module (or a new `routes/<resource>.ts` registered below), declare it with
 *      `createRoute({ method, path: "/api/v1/things/{id}", request: { params, query, body }, responses })`
 *      using zod schemas (shared ones in ../api-schemas.ts; give fields `.describe()`), and list its
 *      error statuses with `...errorResponses(Code.NotFound, …)`.
 *   2. Register it with `app.openapi(route, async (c) => …)`: read the validated input with
 *      `c.req.valid("json" | "query" | "param")`, the caller with `c.get("caller")` (a Principal of
 *      src/core/identity, set for every `/api/v1/` route by the authenticator chain of ../identity/),
 *      and answer `c.json(body, status)`.
 *   3. Fail by throwing a ManentError (src/core/errors.ts): the error handler turns it into
 *      `{"error": {code, message, details}}` with its HTTP status. Bad input never reaches the
 *      handler: the schemas refuse it with `invalid_argument` naming the field.
 *   4. An action that changes something goes through `audited(c, "action", { tenant, deployId }, () => …)`
 *      (../audit.ts), which appends it with its outcome to the audit log.
 *   5. Authorize: find what the caller may read first, and report what it may not as not found (see
 *      visibleDeploy in deploys.ts); then `authorize(caller, action, {tenant, application, environment})`
 *      before acting (403 naming the missing permission). Lists filter in their query with
 *      `scopesFor(caller, "read")` (../identity/access.ts), so their limits count what is shown.
 *   6. Run `npm run docs` and commit docs/reference/ (test/docs checks it is up to date).
 */
import type { ApiApp, ApiDeps } from "../api-deps.js";
import { auditRoutes } from "./audit.js";
import { deployRoutes } from "./deploys.js";
import { driftRoutes } from "./drift.js";
import { eventRoutes } from "./events.js";
import type { EventStreams } from "../event-streams.js";
import { healthRoutes } from "./health.js";
import { openApiRoute, openApiPath } from "./openapi.js";
import { overviewRoutes } from "./overview.js";
import { oidcRoutes } from "./oidc.js";
import { pluginRoutes } from "./plugins.js";
import { envconfigRoutes } from "./envconfig.js";
import { uploadRoutes } from "./uploads.js";
import { retentionRoutes } from "./retention.js";
import { rolloutRoutes } from "./rollouts.js";
import { releaseRoutes } from "./releases.js";
import { sessionRoutes } from "./session.js";
import { tokenRoutes } from "./tokens.js";
import { uiRoutesOn } from "./ui.js";
import { versionPath, versionRoute } from "./version.js";

/** The /api/v1/ routes answered without authentication (nor the database): the API's description and the server's version. */
export const publicApiPaths: ReadonlySet<string> = new Set([openApiPath, versionPath]);

export { openApiPath };

export function registerRoutes(app: ApiApp, deps: ApiDeps, streams: () => EventStreams): void {
  healthRoutes(app, deps);
  versionRoute(app);
  sessionRoutes(app);
  oidcRoutes(app, deps);
  deployRoutes(app, deps);
  overviewRoutes(app, deps);
  rolloutRoutes(app, deps);
  driftRoutes(app, deps);
  releaseRoutes(app, deps, streams);
  pluginRoutes(app, deps);
  envconfigRoutes(app, deps);
  uploadRoutes(app, deps);
  retentionRoutes(app, deps);
  eventRoutes(app, deps, streams);
  auditRoutes(app, deps);
  tokenRoutes(app, deps);
  uiRoutesOn(app);
  // Last, so the document it serves includes every route registered above.
  openApiRoute(app);
}
