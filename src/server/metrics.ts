import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { EngineMetrics } from "../core/engine/engine-metrics.js";
import { httpMetrics, type HttpMetrics } from "./http-metrics.js";

/**
 * prom-client's default gauges whose names end in `_total`, which Prometheus keeps for counters
 * (`promtool check metrics` refuses them): the same counts are the sums of `nodejs_active_handles`,
 * `nodejs_active_requests` and `nodejs_active_resources`.
 */
const misnamedDefaults = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

/** Where the gauges read at each scrape take their values (the database, the workdir). */
export interface StorageSources {
  /** Bytes of uploads per tenant (a database query). */
  uploadBytes(): Promise<Map<string, number>>;
  /** Bytes of this server's artifacts cache. */
  cacheBytes(): number;
  /** Deploys of the whole fleet queued and running (a database query). */
  deploysInProgress?(): Promise<{ queued: number; running: number }>;
  /** The servers of the fleet, by whether their heartbeat is recent (a database query). */
  fleetServers?(): Promise<{ alive: number; dead: number }>;
  /** This server's work slots (concurrency): held by deploys running their steps, and deploys waiting for one. */
  workSlots?(): { held: number; waiting: number } | undefined;
  /** This server's pool of database connections. */
  pool?: { totalCount: number; idleCount: number; waitingCount: number; options: { max?: number | undefined } };
}

/** The Prometheus metrics of one server, on its own registry (no global state). */
export function createMetrics(): {
  registry: Registry;
  engine: EngineMetrics;
  http: HttpMetrics;
  watchStorage(sources: StorageSources): void;
} {
  const registry = new Registry();
  // Under their usual names (process_cpu_seconds_total, nodejs_heap_size_used_bytes…), as stock dashboards query them.
  collectDefaultMetrics({ register: registry });
  for (const name of misnamedDefaults) registry.removeSingleMetric(name);
  const deploys = new Counter({
    name: "manent_deploys_total",
    help: "Deploys finished, by kind and final status.",
    labelNames: ["kind", "status"],
    registers: [registry],
  });
  const deploySeconds = new Histogram({
    name: "manent_deploy_seconds",
    help: "Wall time of a deploy, from start of its workflow to its end.",
    labelNames: ["kind", "status"],
    buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 180, 600, 1800],
    registers: [registry],
  });
  const queueWait = new Histogram({
    name: "manent_deploy_queue_wait_seconds",
    help: "Time deploys started by this server waited in the queue, from their submission to their start, by kind.",
    labelNames: ["kind"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
    registers: [registry],
  });
  const targetSeconds = new Histogram({
    name: "manent_target_deploy_seconds",
    help: "Time spent on each target by a plugin call, by plugin, phase and target status.",
    labelNames: ["plugin", "phase", "status"],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
    registers: [registry],
  });
  const stepAttempts = new Counter({
    name: "manent_step_attempts_total",
    help: "Attempts of deploy steps, by step and outcome.",
    labelNames: ["step", "outcome"],
    registers: [registry],
  });
  // Per application and environment, never per deploy: one deploy of a key runs at a time.
  const canaryWeight = new Gauge({
    name: "manent_canary_weight",
    help: "Traffic weight (percent) of the candidate of the last canary of each application and environment; 0 once reverted, 100 once promoted.",
    labelNames: ["tenant", "application", "environment"],
    registers: [registry],
  });
  const measurements = new Counter({
    name: "manent_analysis_measurements_total",
    help: "Analysis measurements taken by rollouts, by check and verdict (successful, failed, inconclusive).",
    labelNames: ["check", "verdict"],
    registers: [registry],
  });
  const analysisValue = new Gauge({
    name: "manent_analysis_value",
    help: "The last numeric value an analysis check measured, per application, environment and check.",
    labelNames: ["tenant", "application", "environment", "check"],
    registers: [registry],
  });
  let storage: StorageSources | undefined;
  new Gauge({
    name: "manent_upload_bytes",
    help: "Bytes of uploaded artifacts stored per tenant (what uploads.quota_per_tenant limits), read from the database at each scrape.",
    labelNames: ["tenant"],
    registers: [registry],
    async collect() {
      if (!storage) return;
      // A scrape while the database is away keeps the last values rather than failing.
      const usage = await storage.uploadBytes().catch(() => undefined);
      if (!usage) return;
      this.reset();
      for (const [tenant, bytes] of usage) this.set({ tenant }, bytes);
    },
  });
  new Gauge({
    name: "manent_artifact_cache_bytes",
    help: "Bytes of this server's artifacts cache in its workdir (bounded by artifacts.cache_size).",
    registers: [registry],
    collect() {
      if (storage) this.set(storage.cacheBytes());
    },
  });
  new Gauge({
    name: "manent_deploys_in_progress",
    help: "Deploys of the whole fleet queued (submitted, not started) and running, read from the database at each scrape.",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const counts = await storage?.deploysInProgress?.().catch(() => undefined);
      if (!counts) return;
      this.set({ status: "queued" }, counts.queued);
      this.set({ status: "running" }, counts.running);
    },
  });
  new Gauge({
    name: "manent_fleet_servers",
    help: "Servers of the fleet sharing this database, alive (a heartbeat within dbos.dead_after) or dead (not yet taken over), read at each scrape.",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const counts = await storage?.fleetServers?.().catch(() => undefined);
      if (!counts) return;
      this.set({ state: "alive" }, counts.alive);
      this.set({ state: "dead" }, counts.dead);
    },
  });
  new Gauge({
    name: "manent_work_slots",
    help: "This server's work slots (concurrency): held by deploys running their steps, and deploys waiting for one (a deploy waiting durably holds none).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const usage = storage?.workSlots?.();
      if (!usage) return;
      this.set({ state: "held" }, usage.held);
      this.set({ state: "waiting" }, usage.waiting);
    },
  });
  new Gauge({
    name: "manent_database_pool_connections",
    help: "Connections of this server's database pool, by state: active (lent to a query) or idle.",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const pool = storage?.pool;
      if (!pool) return;
      this.set({ state: "active" }, pool.totalCount - pool.idleCount);
      this.set({ state: "idle" }, pool.idleCount);
    },
  });
  new Gauge({
    name: "manent_database_pool_waiting",
    help: "Queries of this server waiting for a connection of its database pool (all in use).",
    registers: [registry],
    collect() {
      if (storage?.pool) this.set(storage.pool.waitingCount);
    },
  });
  new Gauge({
    name: "manent_database_pool_max_connections",
    help: "The most connections this server's database pool opens.",
    registers: [registry],
    collect() {
      const max = storage?.pool?.options.max;
      if (max !== undefined) this.set(max);
    },
  });
  return {
    registry,
    http: httpMetrics(registry),
    watchStorage(sources) {
      storage = sources;
    },
    engine: {
      deployStarted(kind, queuedSeconds) {
        queueWait.observe({ kind }, queuedSeconds);
      },
      deployFinished(kind, status, seconds) {
        deploys.inc({ kind, status });
        deploySeconds.observe({ kind, status }, seconds);
      },
      targetFinished(plugin, phase, result) {
        if (result.duration_ms !== undefined) targetSeconds.observe({ plugin, phase, status: result.status }, result.duration_ms / 1000);
      },
      stepAttempt(step, outcome) {
        // Numbers (wave-12, gate-3) become N: one series per kind of step, however many waves.
        stepAttempts.inc({ step: step.startsWith("callback:") ? "callback" : step.replace(/\d+/g, "N"), outcome });
      },
      canaryWeight(key, weight) {
        canaryWeight.set({ ...key }, weight);
      },
      analysisMeasured(key, m) {
        measurements.inc({ check: m.check, verdict: m.verdict });
        if (typeof m.value === "number") analysisValue.set({ ...key, check: m.check }, m.value);
      },
    },
  };
}
