import { PgUploadStore } from "../storage/pg-upload-store.js";
import { createServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Server as NetServer } from "node:net";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import type pg from "pg";
import type { Registry } from "prom-client";
import type { Logger } from "../core/contract/index.js";
import { connectionShares, findEnvconfig, loadManentConfig, resolveDatabaseUrl, type LoadedConfig } from "../core/config/index.js";
import { prepareWorkdir } from "../core/artifacts/workdir-modes.js";
import { ArtifactCache } from "../core/artifacts/artifact-cache.js";
import { UploadRetention } from "../storage/upload-retention.js";
import { UploadSweeper } from "./upload-sweeper.js";
import { startHistoryRetention, type RetentionSweeper } from "./retention-sweeper.js";
import { deployWorkflowName, Engine } from "../core/engine/engine.js";
import { reportNewerWork } from "../core/engine/version-upgrade.js";
import { faultPause } from "../core/engine/fault-points.js";
import { releaseWorkflowName, Releases } from "../core/release/releases.js";
import { PgReleaseStore } from "../storage/pg-release-store.js";
import { PluginRegistry, type ExternalPluginFactory } from "../core/engine/plugin-registry.js";
import { Code, ManentError } from "../core/errors.js";
import { builtinPlugins } from "../plugins/builtin.js";
import { EmbeddedDatabase } from "../storage/embedded-postgres.js";
import { PgAuditLog } from "../storage/pg-audit-log.js";
import { PgDeployStore } from "../storage/pg-deploy-store.js";
import { PgEventHub } from "../storage/pg-event-hub.js";
import { EventsNotifier } from "../storage/events-notifier.js";
import { PgNotificationStore } from "../storage/pg-notification-store.js";
import { Notifier } from "../core/notifications/notifier.js";
import { notificationSender } from "../net/notification-sender.js";
import { PgWindowOverrides } from "../storage/pg-window-overrides.js";
import { migrate, underSchemaLock } from "../storage/schema.js";
import { reconcileDeploys, requeueOtherVersions } from "../storage/reconcile-deploys.js";
import { DatabaseHealth, retryingQueries, whileUnavailable } from "../storage/database-health.js";
import { databasePool } from "../storage/database-pool.js";
import { FleetHeartbeats } from "../storage/fleet-heartbeats.js";
import { assertOpenOnLoopbackOnly, createAuthenticator, staticTokenCheck } from "./identity/index.js";
import { idTokenCheck, sessionCheck } from "./oidc/credential-checks.js";
import { PgSessionStore } from "../storage/pg-session-store.js";
import { createApiHandler } from "./http-api.js";
import { ManagedTokens } from "./tokens/managed-tokens.js";
import { PgTokenStore } from "../storage/pg-token-store.js";
import { createMetrics } from "./metrics.js";
import { StartupHandler } from "./startup-handler.js";
import { RequestLog } from "./request-log.js";
import { GitEnvconfigRepository } from "../net/git-envconfig-source.js";
import { openSecretStores } from "../net/secret-stores/open-secret-stores.js";
import { DriftChecker, DriftScheduler } from "../core/drift/index.js";
import { PgDriftStore } from "../storage/pg-drift-store.js";
import { PgAutoDeployClaims } from "../storage/pg-auto-deploy-claims.js";
import { AutoDeployer } from "../core/sync/auto-deploy.js";
import { resolvedOf } from "../core/engine/retry.js";
import { registerDriftMetric } from "./drift-metrics.js";
import { parseListen, refusePlaintextOnNetwork } from "./tls/listen-address.js";
import { ServerCertificates } from "./tls/server-certificates.js";
import { nodeNetwork } from "../net/node-network.js";
import { ociRegistry } from "../net/oci-registry.js";

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:8080 (https:// with `tls.cert_file`). */
  url: string;
  config: LoadedConfig;
  /** Graceful stop: no new requests, running steps finish (up to shutdown_timeout), then everything closes. */
  close(): Promise<void>;
}

export interface ServeOptions {
  logger: Logger;
  /** Overrides `listen` from manent.yml (e.g. 127.0.0.1:0 in tests). */
  listen?: string;
  /** Overrides `dbos.executor_id` from manent.yml (e.g. a pod's name, which one shared manent.yml cannot hold). */
  executorId?: string;
  /** Hosts external plugins; given the server's metrics registry. */
  external?: (registry: Registry) => ExternalPluginFactory;
  /** The request each log line belongs to (the one `logger` reads, see main.ts); else the server's own. */
  requests?: RequestLog;
}

/** Starts manent-server: database (embedded unless database_url), engine, HTTP API. */
export async function serve(configFile: string, opts: ServeOptions): Promise<RunningServer> {
  const { logger } = opts;
  const loaded = await loadManentConfig(configFile);
  // The stores' CA files are read now (a missing one stops the start); a store is asked nothing until a step needs a value.
  const secretStores = await openSecretStores(loaded.secret_stores, loaded.file, loaded.baseDir, logger);
  // Each git envconfig provider is fetched before the server answers: a deploy never reads a repository not yet fetched.
  // A failed first fetch keeps the last good commit of a previous run (kept in the workdir) and is logged.
  const gitRepositories = loaded.envconfig.providers.flatMap((p) =>
    p.type === "git" ? [new GitEnvconfigRepository(p.name, p.git, loaded.workdirPath, (m) => logger.warn(m))] : [],
  );
  for (const repository of gitRepositories) await repository.start();
  const config: LoadedConfig = {
    ...loaded,
    gitEnvconfig: new Map(gitRepositories.map((r) => [r.name, r])),
    secretStores,
    ...(opts.listen && { listen: opts.listen }),
    ...(opts.executorId && { dbos: { ...loaded.dbos, executor_id: opts.executorId } }),
  };
  // Read first (an env: or file: reference), so a missing secret fails the start before anything runs.
  const externalDatabaseUrl = config.dbos.database_url ? await resolveDatabaseUrl(config.dbos.database_url) : undefined;
  // The ways to sign in, asked in order; with none configured the API is open (on loopback only).
  const open = config.auth.tokens.length === 0 && config.auth.oidc === undefined && config.auth.workload_identities.length === 0;
  assertOpenOnLoopbackOnly(config, open);
  const staticTokens = await staticTokenCheck(config);
  // The client secret is read now: a missing one stops the start naming the field. The provider is read when first needed.
  // Sign-in with OIDC and CI workload identities are imported only when configured: jose and
  // openid-client cost every server start about 120 ms of CPU (node --cpu-prof) otherwise.
  const relyingParty = config.auth.oidc
    ? await (await import("./oidc/relying-party.js")).RelyingParty.create(config.auth.oidc, config.file, config.baseDir)
    : undefined;
  // The CA files of CI issuers are read now too; each issuer is discovered when its first token arrives.
  const workloads =
    config.auth.workload_identities.length > 0
      ? await import("./workload-identity/index.js").then(async ({ WorkloadIssuers, workloadIdentityCheck }) =>
          workloadIdentityCheck(
            await WorkloadIssuers.create(config.auth.workload_identities, config.file, config.baseDir),
            config.auth.oidc?.issuer,
          ),
        )
      : undefined;
  refusePlaintextOnNetwork(config, opts.listen !== undefined);
  const certificates = config.tls?.cert_file !== undefined ? await ServerCertificates.load(config, logger) : undefined;
  const metrics = createMetrics();
  // The port is taken first: a server that cannot listen exits before it starts anything else.
  const requests = opts.requests ?? new RequestLog();
  const startup = new StartupHandler(requests);
  const https = certificates && createHttpsServer(certificates.serverOptions(), startup.handle);
  const http = https ?? createServer(startup.handle);
  const address = await listen(http, config.listen);
  if (https) certificates!.watch(https);
  const host = address.address.includes(":") ? `[${address.address}]` : address.address;
  const url = `${certificates ? "https" : "http"}://${host}:${address.port}`;
  const closeHttp = (): Promise<void> =>
    new Promise<void>((r) => {
      certificates?.close();
      if (!http.listening) return r();
      http.close(() => r());
      http.closeIdleConnections();
    });

  let plugins: PluginRegistry | undefined;
  let embedded: EmbeddedDatabase | undefined;
  let pool: pg.Pool | undefined;
  let eventsNotifier: EventsNotifier | undefined;
  let engine: Engine | undefined;
  let events: PgEventHub | undefined;
  let health: DatabaseHealth | undefined;
  let fleet: FleetHeartbeats | undefined;
  let sweeper: UploadSweeper | undefined;
  let historySweeper: RetentionSweeper | undefined;
  let driftChecks: DriftScheduler | undefined;
  let notifier: Notifier | undefined;
  const cleanup = async (): Promise<void> => {
    for (const repository of gitRepositories) repository.stop();
    secretStores.close();
    health?.stop();
    await sweeper?.stop();
    await historySweeper?.stop();
    await driftChecks?.stop();
    await notifier?.stop();
    await events?.close(); // ends the event streams, which would otherwise hold the HTTP server open
    await fleet?.stop();
    await closeHttp();
    await engine?.shutdown(0).catch(() => undefined);
    await plugins?.close();
    await eventsNotifier?.close(); // what the last deploys wrote, for the other servers' streams
    await pool?.end().catch(() => undefined);
    await embedded?.stop();
  };
  try {
    plugins = await PluginRegistry.fromConfig(config, builtinPlugins, logger, opts.external?.(metrics.registry));
    await prepareWorkdir(config.workdirPath);
    embedded = externalDatabaseUrl ? undefined : await EmbeddedDatabase.start(config.workdirPath, logger);
    const databaseUrl = externalDatabaseUrl ?? embedded!.url;
    // The pool's sessions leave the event log's NOTIFYs to the server, one per window (events-notifier.ts).
    const notifyEvents = new EventsNotifier((sql) => db.query(sql), logger);
    eventsNotifier = notifyEvents;
    // A connection that cannot be made in 5 s is an unavailable database, not a request left hanging.
    const db = databasePool(
      { connectionString: databaseUrl, max: connectionShares(config.dbos.connections).records, connectionTimeoutMillis: 5000 },
      { onConnect: (client) => notifyEvents.attach(client) },
    );
    pool = db;
    pool.on("error", (err) => logger.warn("database connection error", { error: err.message }));
    // The API's reads fail fast while the database is away (503); the deploys' own writes wait for it.
    const store = new PgDeployStore(db);
    const workflowStore = new PgDeployStore(retryingQueries(db, logger), {
      retry: (fn) => whileUnavailable(fn, logger, "deploy store"),
      onHeldError: (deploy, err) => logger.warn("a deploy's held write was not recorded", { deploy, error: String(err) }),
    });
    // Bodies are received into the workdir first, so a slow or cut upload never holds a database connection.
    const uploads = new PgUploadStore(db, join(config.workdirPath, "uploads-incoming"));
    await uploads.prepare();
    const cache = new ArtifactCache(join(config.workdirPath, "artifacts"), config.artifacts.cache_size, logger);
    await cache.measure();
    metrics.watchStorage({
      uploadBytes: () => uploads.usage(),
      cacheBytes: () => cache.size(),
      deploysInProgress: () => workflowStore.inProgress(),
      fleetServers: async () => (fleet ? fleet.servers() : { alive: 0, dead: 0 }),
      workSlots: () => engine?.durableWaits.slots?.usage(),
      pool: db,
    });
    const registry = plugins;
    const network = nodeNetwork();
    // Schema changes (manent's and DBOS's) and the start's repairs of the records, one server at a time.
    engine = await underSchemaLock(db, logger, async () => {
      await migrate(db);
      const started = await Engine.start({
        config,
        store: workflowStore,
        plugins: registry,
        logger,
        metrics: metrics.engine,
        databaseUrl,
        network,
        imageRegistry: ociRegistry(),
        uploads,
        cache,
        windowOverrides: new PgWindowOverrides(retryingQueries(db, logger)),
        onDeployEnded: (id) => driftChecks?.deployEnded(id),
      });
      engine = started; // shut down by cleanup if what follows fails
      await reconcileDeploys(db, logger);
      await requeueOtherVersions(db, started.applicationVersion, logger);
      return started;
    });
    const releaseStore = new PgReleaseStore(db);
    const releases = Releases.attach({
      config,
      engine,
      store: new PgReleaseStore(retryingQueries(db, logger)),
      plugins,
      logger,
      network,
      uploads,
    });
    const executorId = config.dbos.executor_id ?? "local";
    // What an older build left must not stop this one from starting: logged, and tried again at the next start.
    await releases
      .settleOtherVersions([executorId])
      .catch((err: unknown) =>
        logger.error("cannot settle the releases of another manent version", { error: ManentError.from(err).message }),
      );
    await reportNewerWork({
      version: engine.applicationVersion,
      workflowNames: { deploy: deployWorkflowName, release: releaseWorkflowName },
      executorIds: [executorId],
      logger,
    }).catch((err: unknown) => logger.warn("cannot list the work of newer manent versions", { error: ManentError.from(err).message }));
    events = await PgEventHub.start(db, databaseUrl, logger);
    const hub = events;
    notifyEvents.alsoTell(() => hub.written());
    const started = engine;
    fleet = new FleetHeartbeats(db, logger, {
      executorId: config.dbos.executor_id ?? "local",
      applicationVersion: started.applicationVersion,
      heartbeatMs: config.dbos.heartbeat_interval,
      deadAfterMs: config.dbos.dead_after,
      recover: async (dead) => {
        await releases.settleOtherVersions([dead]);
        return started.recoverExecutor(dead);
      },
    });
    await fleet.start();
    const retention = new UploadRetention(db, config.uploads.retention);
    sweeper = new UploadSweeper(retention, config.uploads.retention.sweep_interval, logger);
    sweeper.start();
    historySweeper = await startHistoryRetention(config, db, started, logger);
    const driftStore = new PgDriftStore(db);
    const drift = {
      store: driftStore,
      checker: new DriftChecker({
        config,
        plugins,
        store: driftStore,
        logger,
        network,
        submit: (s, by) => started.submit(s, by),
        resolvedOf: async (id) => {
          const d = await store.getDeploy(id);
          return d && resolvedOf(d);
        },
      }),
    };
    registerDriftMetric(metrics.registry, driftStore);
    const scheduler = new DriftScheduler(config, driftStore, drift.checker, logger);
    // A deploy that ends may make its environment due for a first check: the engine tells this
    // server of the deploys it ran (onDeployEnded above), so each is looked at by one server of a
    // fleet, not by all (every server read every deploy's end through its hub, and looked at its
    // key, 40 ms of Postgres a second per server at 100 deploys a second). A deploy ended by a
    // server that died before its look is in the next look at every key, within 10 s.
    driftChecks = scheduler;
    scheduler.start();
    // Notifications follow the event log: planned from it into an outbox and delivered beside the deploys, never in them.
    const notifications = new Notifier({
      config: config.notifications,
      store: new PgNotificationStore(db),
      sender: notificationSender(config, network),
      logger,
    });
    notifier = notifications;
    // Without subscriptions nothing is planned: the pump then only moves its cursor on, at its idle
    // pace (a few statements every 30 s instead of at every burst of events).
    if (config.notifications.subscriptions.length > 0) events.subscribe({}, () => notifications.wake(), undefined, { background: true });
    notifications.start();
    const autoDeploy = new AutoDeployer({
      config,
      releases: driftStore,
      claims: new PgAutoDeployClaims(db),
      submit: (s, by) => started.submit(s, by),
      logger,
    });
    const autoDeployLook = () =>
      autoDeploy.run().catch((err: unknown) => logger.warn("auto-deploy look failed", { error: ManentError.from(err).message }));
    for (const repository of gitRepositories) repository.onRefreshed(autoDeployLook);
    // What changed on the ref while no server looked (the first fetch ran before the engine started).
    if (gitRepositories.length > 0) void autoDeployLook();
    // Managed tokens after manent.yml's: a value from manent.yml is never looked up in the database.
    const tokens = new ManagedTokens(new PgTokenStore(db), new Set(config.auth.tokens.map((t) => t.name)), logger);
    const sessions = new PgSessionStore(db);
    const auth = createAuthenticator(
      [
        staticTokens,
        tokens.check,
        // Before a person's ID token: a CI job's token from the issuer auth.oidc trusts too is told apart by its audience.
        ...(workloads ? [workloads] : []),
        ...(relyingParty ? [idTokenCheck(relyingParty, config), sessionCheck(sessions, config)] : []),
      ],
      { open },
    );
    health = new DatabaseHealth(db, logger);
    health.start();
    startup.ready(
      createApiHandler({
        engine,
        gitEnvconfig: gitRepositories,
        autoDeploy,
        envconfigHeads: (key) =>
          findEnvconfig(config, key).then(
            (f) => f.origin,
            () => undefined,
          ),
        releases,
        releaseStore,
        store,
        overview: store,
        plugins,
        auth,
        tokens,
        ...(relyingParty && { oidc: { relyingParty, sessions, config } }),
        metrics: metrics.registry,
        http: metrics.http,
        requests,
        logger,
        database: health,
        ping: async () => void (await db.query("select 1")),
        uploads: { store: uploads, maxSize: config.artifacts.max_upload_size, config: config.uploads, retention },
        events,
        audit: new PgAuditLog(db),
        ...(historySweeper && { retention: historySweeper }),
        drift,
      }),
    );
    logger.info("manent-server started", { url, database: embedded ? "embedded" : "external", workdir: config.workdirPath });
    let closing: Promise<void> | undefined;
    return {
      url,
      config,
      close: () =>
        (closing ??= (async () => {
          logger.info("shutting down: waiting for running steps", { timeout_ms: config.shutdown_timeout });
          await driftChecks?.stop();
          await notifier?.stop();
          await events?.close();
          await sweeper?.stop();
          await historySweeper?.stop();
          await closeHttp();
          await engine?.shutdown(config.shutdown_timeout);
          engine = undefined;
          await faultPause("shutdown", "stopped");
          await workflowStore.flushHeld();
          await cleanup();
          logger.info("manent-server stopped");
        })()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

function listen(http: NetServer, listenAt: string): Promise<AddressInfo> {
  const { host, port } = parseListen(listenAt);
  return new Promise((resolve, reject) => {
    http.once("error", (err: NodeJS.ErrnoException) =>
      reject(new ManentError(Code.Unavailable, `cannot listen on ${listenAt}: ${err.code ?? err.message}`, { cause: err })),
    );
    http.listen(port, host, () => resolve(http.address() as AddressInfo));
  });
}
