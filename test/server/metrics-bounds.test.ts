import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/server/metrics.js";

/** Metrics whose labels could grow with every deploy or wave stay bounded. */
describe("metrics bounds", () => {
  const labels = (n: number) => ({ deploy: `d-${n}`, tenant: "t", application: "a", environment: "e" });
  const seriesOf = async (m: ReturnType<typeof createMetrics>, name: string) =>
    (await m.registry.getSingleMetric(name)!.get()).values.map((v) => v.labels);

  it("keeps per-deploy canary and analysis series for the 200 most recent deploys", async () => {
    const m = createMetrics();
    for (let n = 0; n < 250; n++) {
      m.engine.canaryWeight(labels(n), 10);
      m.engine.analysisMeasured(labels(n), { check: "error-rate", value: 0.01, verdict: "successful" });
    }
    const weights = await seriesOf(m, "manent_canary_weight");
    assert.equal(weights.length, 200);
    assert.equal(
      weights.some((l) => l.deploy === "d-0"),
      false,
      "the oldest deploy's series is gone",
    );
    assert.ok(weights.some((l) => l.deploy === "d-249"));
    const values = await seriesOf(m, "manent_analysis_value");
    assert.equal(values.length, 200);
    assert.equal(
      values.some((l) => l.deploy === "d-49"),
      false,
    );
  });

  it("counts step attempts per kind of step, not per wave or gate number", async () => {
    const m = createMetrics();
    for (let w = 1; w <= 30; w++) m.engine.stepAttempt(`wave-${w}:deploy`, "succeeded");
    m.engine.stepAttempt("wave-3:gate-1:pause", "succeeded");
    const steps = (await seriesOf(m, "manent_step_attempts_total")).map((l) => l.step);
    assert.deepEqual([...new Set(steps)].sort(), ["wave-N:deploy", "wave-N:gate-N:pause"]);
  });
});
