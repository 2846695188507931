import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/server/metrics.js";

/** Metrics whose labels could grow with every deploy or wave stay bounded. */
describe("metrics bounds", () => {
  const key = { tenant: "t", application: "a", environment: "e" };
  const seriesOf = async (m: ReturnType<typeof createMetrics>, name: string) =>
    (await m.registry.getSingleMetric(name)!.get()).values.map((v) => v.labels);

  it("keeps one canary and analysis series per application and environment, however many deploys", async () => {
    const m = createMetrics();
    for (let n = 0; n < 250; n++) {
      m.engine.canaryWeight(key, n % 100);
      m.engine.analysisMeasured(key, { check: "error-rate", value: n, verdict: "successful" });
    }
    m.engine.canaryWeight({ ...key, environment: "f" }, 10);
    const weights = await m.registry.getSingleMetric("manent_canary_weight")!.get();
    assert.deepEqual(
      weights.values.map((v) => [v.labels, v.value]),
      [
        [key, 49],
        [{ ...key, environment: "f" }, 10],
      ],
    );
    const values = await m.registry.getSingleMetric("manent_analysis_value")!.get();
    assert.deepEqual(
      values.values.map((v) => [v.labels, v.value]),
      [[{ ...key, check: "error-rate" }, 249]],
    );
  });

  it("counts step attempts per kind of step, not per wave or gate number", async () => {
    const m = createMetrics();
    for (let w = 1; w <= 30; w++) m.engine.stepAttempt(`wave-${w}:deploy`, "succeeded");
    m.engine.stepAttempt("wave-3:gate-1:pause", "succeeded");
    const steps = (await seriesOf(m, "manent_step_attempts_total")).map((l) => l.step);
    assert.deepEqual([...new Set(steps)].sort(), ["wave-N:deploy", "wave-N:gate-N:pause"]);
  });

  it("labels HTTP requests by the route registered, and folds unknown methods into OTHER", async () => {
    const m = createMetrics();
    m.http.observe("GET", "/api/v1/deploys/:id", 200, 0.01);
    m.http.observe("BREW", "unmatched", 404, 0.001);
    const labels = await seriesOf(m, "manent_http_requests_total");
    assert.deepEqual(labels, [
      { method: "GET", route: "/api/v1/deploys/:id", code: "200" },
      { method: "OTHER", route: "unmatched", code: "404" },
    ]);
  });
});
