import type { SecretRef } from "../config/secret-ref.js";
import type { Capability } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import type { RolloutSettings } from "./rollout-config.js";
import type { AnalysisSection } from "./analysis/index.js";

/**
 * Refuses, before anything is recorded, an analysis step naming a check the envconfig does not
 * define, and a canary the plugin cannot run: slots are needed for any
 * canary, traffic_router or scale for a weight step, testers for `testers: true`; header_route,
 * mirror and session_affinity for those settings (Unimplemented: the plugin cannot do it). The
 * message names the envconfig field and the missing capability.
 */
export function checkRolloutSettings(
  rollout: RolloutSettings,
  analysis: AnalysisSection | undefined,
  plugin: string,
  caps: readonly Capability[],
  file: string,
): void {
  const canary = rollout.canary;
  const background = rollout.background_analysis;
  const analysisSteps = [
    ...stepsAndGates(rollout).map(([s, at]) => [s, `${at}.analysis.checks`] as const),
    ...(background ? [[{ analysis: { checks: background.checks } }, "rollout.background_analysis.checks"] as const] : []),
    ...(rollout.post_promotion_analysis
      ? [[{ analysis: rollout.post_promotion_analysis }, "rollout.post_promotion_analysis.checks"] as const]
      : []),
  ];
  for (const [step, field] of analysisSteps) {
    if (!("analysis" in step)) continue;
    for (const [i, name] of step.analysis.checks.entries()) {
      if (analysis?.checks[name]) continue;
      const known = Object.keys(analysis?.checks ?? {});
      throw new ManentError(
        Code.InvalidArgument,
        `${file}: ${field}.${i}: no check named "${name}" in analysis.checks (${known.length ? `known: ${known.join(", ")}` : "none defined"})`,
        { details: { file, field: `${field}.${i}` } },
      );
    }
  }
  if (background) checkBackground(background, rollout, file);
  if (!canary) return;
  const refuse = (field: string, missing: string, why: string): never => {
    throw new ManentError(Code.InvalidArgument, `${file}: ${field}: plugin ${plugin} does not declare the ${missing} capability (${why})`, {
      details: { file, field, capability: missing },
    });
  };
  if (!caps.includes("slots")) refuse("rollout.canary", "slots", "a canary deploys a candidate beside the running release");
  if (canary.testers && !caps.includes("testers")) refuse("rollout.canary.testers", "testers", "needed to route testers to the candidate");
  const unsupported = (field: string, missing: string, what: string): never => {
    throw new ManentError(
      Code.Unimplemented,
      `${file}: ${field}: plugin ${plugin} cannot ${what} (it does not declare the ${missing} capability; see the table in docs/plugins)`,
      { details: { file, field, capability: missing } },
    );
  };
  const headerRoute = canary.steps.findIndex((s) => "set_header_route" in s);
  if (headerRoute >= 0 && !caps.includes("header_route"))
    unsupported(
      `rollout.canary.steps.${headerRoute}.set_header_route`,
      "header_route",
      "send requests to the candidate by header or cookie",
    );
  const mirror = canary.steps.findIndex((s) => "set_mirror" in s);
  if (mirror >= 0 && !caps.includes("mirror"))
    unsupported(`rollout.canary.steps.${mirror}.set_mirror`, "mirror", "copy requests to the candidate (mirroring)");
  if (canary.session_affinity && !caps.includes("session_affinity"))
    unsupported("rollout.canary.session_affinity", "session_affinity", "keep a client on the version it first reached");
  const weighted = canary.steps.findIndex((s) => "set_weight" in s);
  if (weighted >= 0 && !caps.includes("traffic_router") && !caps.includes("scale")) {
    refuse(
      `rollout.canary.steps.${weighted}.set_weight`,
      "traffic_router",
      "a weight moves traffic (or capacity, with the scale capability)",
    );
  }
}

/** Background analysis runs from a canary step, or across the waves: a setting that would never run it is refused. */
function checkBackground(background: NonNullable<RolloutSettings["background_analysis"]>, rollout: RolloutSettings, file: string): void {
  const refuse = (field: string, why: string): never => {
    throw new ManentError(Code.InvalidArgument, `${file}: rollout.background_analysis.${field}: ${why}`, {
      details: { file, field: `rollout.background_analysis.${field}` },
    });
  };
  const steps = rollout.canary?.steps.length;
  if (steps === undefined && !(background.waves && rollout.waves))
    refuse("checks", "runs during a canary: set rollout.canary, or waves: true with rollout.waves to run it across the waves");
  if (steps !== undefined && background.starting_step > steps)
    refuse("starting_step", `step ${background.starting_step} does not exist: the canary has ${steps} step${steps === 1 ? "" : "s"}`);
  if (steps === undefined && background.starting_step !== 1)
    refuse("starting_step", "names a canary step, and there is no rollout.canary (across the waves it starts with the first wave)");
}

/**
 * Every secret reference a rollout reads while it runs (analysis checks' and webhooks' bearer
 * tokens), with its envconfig field: the submission checks each is readable, so a missing one is
 * refused before anything is recorded rather than stopping the rollout halfway.
 */
export function rolloutSecretRefs(rollout: RolloutSettings, analysis: AnalysisSection | undefined): { field: string; ref: SecretRef }[] {
  const refs: { field: string; ref: SecretRef }[] = [];
  for (const [name, check] of Object.entries(analysis?.checks ?? {})) {
    if (check.prometheus?.bearer_token)
      refs.push({ field: `analysis.checks.${name}.prometheus.bearer_token`, ref: check.prometheus.bearer_token });
    if (check.http?.bearer_token) refs.push({ field: `analysis.checks.${name}.http.bearer_token`, ref: check.http.bearer_token });
  }
  for (const [step, at] of stepsAndGates(rollout)) {
    if ("webhook" in step && step.webhook.bearer_token) refs.push({ field: `${at}.webhook.bearer_token`, ref: step.webhook.bearer_token });
  }
  if (rollout.load_test?.bearer_token) refs.push({ field: "rollout.load_test.bearer_token", ref: rollout.load_test.bearer_token });
  return refs;
}

/** The canary's steps and the gates between waves, each with its envconfig field. */
function stepsAndGates(rollout: RolloutSettings) {
  return [
    ...(rollout.canary?.steps ?? []).map((s, i) => [s, `rollout.canary.steps.${i}`] as const),
    ...(rollout.waves?.between ?? []).map((s, i) => [s, `rollout.waves.between.${i}`] as const),
  ];
}
