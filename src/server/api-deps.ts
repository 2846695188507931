import type { GitEnvconfigRepository } from "../net/git-envconfig-source.js";
import type { AutoDeployResult } from "../core/sync/auto-deploy.js";
import type { EnvconfigHeads } from "../core/environments/overview.js";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Registry } from "prom-client";
import type { Logger } from "../core/contract/index.js";
import type { LoadedConfig } from "../core/config/index.js";
import type { DeployStore } from "../core/engine/deploy-store.js";
import type { Engine } from "../core/engine/engine.js";
import type { OverviewSource } from "../core/environments/overview.js";
import type { DriftChecker, DriftStore } from "../core/drift/index.js";
import type { Releases } from "../core/release/releases.js";
import type { ReleaseStore } from "../core/release/release-store.js";
import type { PluginRegistry } from "../core/engine/plugin-registry.js";
import type { Principal } from "../core/identity/index.js";
import type { PgAuditLog } from "../storage/pg-audit-log.js";
import type { PgEventHub } from "../storage/pg-event-hub.js";
import type { PgSessionStore } from "../storage/pg-session-store.js";
import type { Authenticator } from "./identity/index.js";
import type { HttpMetrics } from "./http-metrics.js";
import type { RequestIdEnv, RequestLog } from "./request-log.js";
import type { RelyingParty } from "./oidc/relying-party.js";
import type { DatabaseHealth } from "../storage/database-health.js";
import type { ManagedTokens } from "./tokens/managed-tokens.js";
import type { UploadDeps } from "./uploads.js";
import type { SweepResult } from "../core/retention/retention-sweep.js";

/**
 * What the HTTP API is built from (its dependencies) and what its handlers find in the request
 * context: a leaf module, so the route modules and http-api.ts, which registers them, do not
 * import each other.
 */
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
  /** The HTTP requests' metrics (request-log.ts observes them). */
  http: HttpMetrics;
  /** The request each log line belongs to. */
  requests: RequestLog;
  logger: Logger;
  /** Checks the database for /readyz and /healthz. */
  ping: () => Promise<void>;
  /** Where clients' uploaded artifacts go, and how large one may be. */
  uploads: UploadDeps;
  /** The event log's live feed (LISTEN/NOTIFY) and reader. */
  events: PgEventHub;
  /** The history retention sweep (routes/retention.ts), when retention is configured. */
  retention?: { now(): Promise<SweepResult | undefined> };
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
  Variables: RequestIdEnv["Variables"] & { caller: Principal; services: { audit: PgAuditLog; logger: Logger } };
}
export type ApiApp = OpenAPIHono<ApiEnv>;
