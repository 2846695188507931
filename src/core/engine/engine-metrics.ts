import type { TargetResult } from "../contract/index.js";
import type { DeployKind, DeployStatus } from "./deploy-store.js";

/** What the engine reports to metrics; the server implements it with prom-client. */
export interface EngineMetrics {
  /** A deploy leaves the queue (`manent_deploy_queue_wait_seconds`): how long it waited since its submission. */
  deployStarted(kind: DeployKind, queuedSeconds: number): void;
  deployFinished(kind: DeployKind, status: DeployStatus, seconds: number): void;
  /** Fed from every target result (`manent_target_deploy_seconds`). */
  targetFinished(plugin: string, phase: string, result: TargetResult): void;
  stepAttempt(step: string, outcome: "succeeded" | "failed"): void;
  /** The candidate's traffic weight of the canary of a deploy of the key (`manent_canary_weight`). */
  canaryWeight(key: DeployLabels, weight: number): void;
  /** One analysis measurement (`manent_analysis_measurements_total`, `manent_analysis_value`). */
  analysisMeasured(deploy: DeployLabels, m: { check: string; value: number | string | null; verdict: string }): void;
}

/**
 * Which application and environment a metric is about: never the deploy's id, whose values would
 * grow with every deploy (one deploy of a key runs at a time, so the key names it while it runs).
 */
export interface DeployLabels {
  tenant: string;
  application: string;
  environment: string;
}

export const noMetrics: EngineMetrics = {
  deployStarted() {},
  deployFinished() {},
  targetFinished() {},
  stepAttempt() {},
  canaryWeight() {},
  analysisMeasured() {},
};
