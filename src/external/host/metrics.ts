import { Counter, Gauge, type Registry } from "prom-client";

/**
 * Supervision metrics, named after the reference supervisors' counters (kandev RestartCount,
 * ggscale RestartCount/TotalRestartCount) with a `manent_` prefix, labelled by plugin.
 */
export interface PluginMetrics {
  up(v: boolean): void;
  restarted(): void;
  consecutiveRestarts(n: number): void;
  healthCheckFailed(): void;
  gaveUp(v: boolean): void;
}

function getOrCreate<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export function pluginMetrics(plugin: string, registry?: Registry): PluginMetrics {
  if (!registry) return { up() {}, restarted() {}, consecutiveRestarts() {}, healthCheckFailed() {}, gaveUp() {} };
  const registers = [registry];
  const labelNames = ["plugin"] as const;
  const up = getOrCreate(
    registry,
    "manent_plugin_up",
    () =>
      new Gauge({ name: "manent_plugin_up", help: "1 while the external plugin process is running and configured", labelNames, registers }),
  );
  const total = getOrCreate(
    registry,
    "manent_plugin_restarts_total",
    () =>
      new Counter({
        name: "manent_plugin_restarts_total",
        help: "Lifetime restarts of the external plugin process after a crash or a failed health check",
        labelNames,
        registers,
      }),
  );
  const consecutive = getOrCreate(
    registry,
    "manent_plugin_consecutive_restarts",
    () =>
      new Gauge({
        name: "manent_plugin_consecutive_restarts",
        help: "Consecutive failed lifecycles since the plugin was last healthy",
        labelNames,
        registers,
      }),
  );
  const pings = getOrCreate(
    registry,
    "manent_plugin_health_check_failures_total",
    () =>
      new Counter({
        name: "manent_plugin_health_check_failures_total",
        help: "Failed health pings of the external plugin",
        labelNames,
        registers,
      }),
  );
  const gave = getOrCreate(
    registry,
    "manent_plugin_gave_up",
    () =>
      new Gauge({
        name: "manent_plugin_gave_up",
        help: "1 when the supervisor stopped restarting the plugin (crash loop)",
        labelNames,
        registers,
      }),
  );
  const l = { plugin };
  return {
    up: (v) => up.set(l, v ? 1 : 0),
    restarted: () => total.inc(l),
    consecutiveRestarts: (n) => consecutive.set(l, n),
    healthCheckFailed: () => pings.inc(l),
    gaveUp: (v) => gave.set(l, v ? 1 : 0),
  };
}
