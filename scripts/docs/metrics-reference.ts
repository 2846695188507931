import type { Registry } from "prom-client";
import { pluginMetrics } from "../../src/external/host/metrics.js";
import { createMetrics } from "../../src/server/metrics.js";
import { registerDriftMetric } from "../../src/server/drift-metrics.js";

interface MetricInfo {
  name: string;
  type: string;
  help: string;
  labelNames: string[];
}

/**
 * The metrics a server exposes on /metrics, read from the registry the server builds
 * (`createMetrics`), with the supervision metrics an external plugin registers on it. No server
 * is started: building the registry is all it takes.
 */
export async function metricsReference(): Promise<string> {
  const { registry } = createMetrics();
  pluginMetrics("example", registry);
  registerDriftMetric(registry, { driftedCounts: () => Promise.resolve([]) });
  const metrics = await collect(registry);
  const own = metrics.filter((m) => m.name.startsWith("manent_"));
  if (!metrics.some((m) => m.name.startsWith("process_"))) throw new Error("the registry lost its process metrics");
  return [
    "Histograms also expose `_bucket`, `_sum` and `_count` series; the `plugin` label of the supervision",
    "metrics is the plugin's name in manent.yml.",
    "",
    "| Metric | Type | Labels | Help |",
    "|---|---|---|---|",
    ...own.map(
      (m) => `| \`${m.name}\` | ${m.type} | ${m.labelNames.map((l) => `\`${l}\``).join(", ")} | ${m.help.replace(/\|/g, "\\|")} |`,
    ),
    "",
    "The server also exposes prom-client's default metrics of its Node.js process under their usual",
    "names, as stock dashboards query them: `process_cpu_seconds_total`, `process_resident_memory_bytes`,",
    "`process_open_fds`, `nodejs_heap_size_used_bytes`, `nodejs_eventloop_lag_seconds`,",
    "`nodejs_gc_duration_seconds`, `nodejs_active_handles` and others (the exact set depends on the",
    "Node.js version). Their `nodejs_active_*_total` gauges are left out, as Prometheus keeps `_total`",
    "for counters: the same counts are the sums of `nodejs_active_handles`, `nodejs_active_requests`",
    "and `nodejs_active_resources`. `promtool check metrics` finds nothing to say (tested).",
  ].join("\n");
}

async function collect(registry: Registry): Promise<MetricInfo[]> {
  const labels = new Map<string, string[]>();
  for (const m of registry.getMetricsAsArray()) {
    labels.set(
      m.name,
      ((m as unknown as { labelNames?: string[] }).labelNames ?? []).filter((l) => l !== "le"),
    );
  }
  const out = (await registry.getMetricsAsJSON()).map((json) => ({
    name: json.name,
    type: String(json.type),
    help: json.help,
    labelNames: labels.get(json.name) ?? [],
  }));
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
