import { Gauge, type Registry } from "prom-client";
import type { DriftStore } from "../core/drift/index.js";

/**
 * `manent_drifted_targets`: targets whose last drift check found drift, per tenant, application and
 * environment. Read from Postgres at each scrape, so every server of a fleet reports the same,
 * whichever ran the check.
 */
export function registerDriftMetric(registry: Registry, store: Pick<DriftStore, "driftedCounts">): void {
  new Gauge({
    name: "manent_drifted_targets",
    help: "Targets whose last drift check found that they no longer run what manent deployed, per tenant, application and environment.",
    labelNames: ["tenant", "application", "environment"],
    registers: [registry],
    async collect() {
      // While the database is away the last values stay: /metrics still answers.
      const rows = await store.driftedCounts().catch(() => undefined);
      if (!rows) return;
      this.reset();
      for (const row of rows) {
        this.set({ tenant: row.tenant, application: row.application, environment: row.environment }, row.drifted);
      }
    },
  });
}
