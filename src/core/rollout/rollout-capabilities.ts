import type { Capability } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import type { RolloutSettings } from "./rollout-config.js";

/**
 * Refuses, before anything is recorded, a canary the plugin cannot run: slots are needed for any
 * canary, traffic_router or scale for a weight step, testers for `testers: true`. The message names
 * the envconfig field and the missing capability.
 */
export function checkRolloutCapabilities(rollout: RolloutSettings, plugin: string, caps: readonly Capability[], file: string): void {
  const canary = rollout.canary;
  const analysis = [
    ...(canary?.steps ?? []).map((s, i) => ["analysis" in s, `rollout.canary.steps.${i}.analysis`] as const),
    ...(rollout.waves?.between ?? []).map((s, i) => ["analysis" in s, `rollout.waves.between.${i}.analysis`] as const),
  ].find(([is]) => is);
  if (analysis) {
    throw new ManentError(Code.InvalidArgument, `${file}: ${analysis[1]}: analysis checks are not available in this build yet`, {
      details: { file, field: analysis[1] },
    });
  }
  if (!canary) return;
  const refuse = (field: string, missing: string, why: string): never => {
    throw new ManentError(Code.InvalidArgument, `${file}: ${field}: plugin ${plugin} does not declare the ${missing} capability (${why})`, {
      details: { file, field, capability: missing },
    });
  };
  if (!caps.includes("slots")) refuse("rollout.canary", "slots", "a canary deploys a candidate beside the running release");
  if (canary.testers && !caps.includes("testers")) refuse("rollout.canary.testers", "testers", "needed to route testers to the candidate");
  const weighted = canary.steps.findIndex((s) => "set_weight" in s);
  if (weighted >= 0 && !caps.includes("traffic_router") && !caps.includes("scale")) {
    refuse(`rollout.canary.steps.${weighted}.set_weight`, "traffic_router", "a weight moves traffic (or capacity, with the scale capability)");
  }
}
