import type { AnalysisCheck } from "./check-schema.js";
import type { Measurement } from "./measurement.js";

export interface Judgement {
  state: "running" | "successful" | "failed";
  /** Why it ended, naming the check, the value and the condition (from the deciding measurement). */
  reason?: string;
}

/**
 * The state of a check from its measurements so far. It fails as soon as the failed measurements
 * exceed `failure_limit` or the inconclusive ones exceed `inconclusive_limit`; it succeeds once it
 * has `count` conclusive (successful or failed) measurements without failing. Inconclusive
 * measurements do not count towards `count`, so a flaky Prometheus delays a verdict but cannot
 * produce one: a check never succeeds without a successful measurement.
 */
export function judge(check: AnalysisCheck, measurements: Measurement[]): Judgement {
  const failed = measurements.filter((m) => m.verdict === "failed");
  const inconclusive = measurements.filter((m) => m.verdict === "inconclusive");
  const successful = measurements.filter((m) => m.verdict === "successful");
  if (failed.length > check.failure_limit) {
    return {
      state: "failed",
      reason: `${failed.at(-1)!.message} (${failed.length} failed measurement${failed.length > 1 ? "s" : ""}, failure_limit ${check.failure_limit})`,
    };
  }
  if (inconclusive.length > check.inconclusive_limit) {
    return {
      state: "failed",
      reason: `${inconclusive.at(-1)!.message} (${inconclusive.length} inconclusive measurements, inconclusive_limit ${check.inconclusive_limit})`,
    };
  }
  if (successful.length + failed.length >= check.count) {
    const last = successful.at(-1)!;
    return {
      state: "successful",
      reason: `${last.message} (${successful.length} of ${successful.length + failed.length} measurements successful)`,
    };
  }
  return { state: "running" };
}
