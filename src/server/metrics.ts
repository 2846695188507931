import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { EngineMetrics } from "../core/engine/engine-metrics.js";

/** How many deploys keep their per-deploy series (canary weight, analysis values). */
const maxDeploySeries = 200;

/** Where the storage gauges read their values when scraped. */
export interface StorageSources {
  /** Bytes of uploads per tenant (a database query). */
  uploadBytes(): Promise<Map<string, number>>;
  /** Bytes of this server's artifacts cache. */
  cacheBytes(): number;
}

/** The Prometheus metrics of one server, on its own registry (no global state). */
export function createMetrics(): { registry: Registry; engine: EngineMetrics; watchStorage(sources: StorageSources): void } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "manent_process_" });
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
  const canaryWeight = new Gauge({
    name: "manent_canary_weight",
    help: "Traffic weight (percent) of the candidate of each deploy's canary; 0 once reverted, 100 once promoted.",
    labelNames: ["deploy", "tenant", "application", "environment"],
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
    help: "The last numeric value an analysis check measured, per deploy and check.",
    labelNames: ["deploy", "tenant", "application", "environment", "check"],
    registers: [registry],
  });
  // Per-deploy series are kept for the most recent deploys only, so a server that runs canaries for
  // months does not grow a series per deploy it ever ran.
  const perDeploy = new Map<string, { deploy: Record<string, string>; checks: Set<string> }>();
  const seriesOf = (deploy: Record<string, string>) => {
    const id = deploy.deploy ?? "";
    let entry = perDeploy.get(id);
    if (!entry) {
      entry = { deploy, checks: new Set() };
      perDeploy.set(id, entry);
      for (const [oldId, old] of perDeploy) {
        if (perDeploy.size <= maxDeploySeries) break;
        canaryWeight.remove(old.deploy);
        for (const check of old.checks) analysisValue.remove({ ...old.deploy, check });
        perDeploy.delete(oldId);
      }
    }
    return entry;
  };
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
  return {
    registry,
    watchStorage(sources) {
      storage = sources;
    },
    engine: {
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
      canaryWeight(deploy, weight) {
        seriesOf({ ...deploy });
        canaryWeight.set({ ...deploy }, weight);
      },
      analysisMeasured(deploy, m) {
        measurements.inc({ check: m.check, verdict: m.verdict });
        if (typeof m.value !== "number") return;
        seriesOf({ ...deploy }).checks.add(m.check);
        analysisValue.set({ ...deploy, check: m.check }, m.value);
      },
    },
  };
}
