import type { TargetResult } from "../contract/index.js";
import type { DeployKind, DeployStatus } from "./deploy-store.js";

/** What the engine reports to metrics; the server implements it with prom-client. */
export interface EngineMetrics {
  deployFinished(kind: DeployKind, status: DeployStatus, seconds: number): void;
  /** Fed from every target result (`manent_target_deploy_seconds`). */
  targetFinished(plugin: string, phase: string, result: TargetResult): void;
  stepAttempt(step: string, outcome: "succeeded" | "failed"): void;
  /** The candidate's traffic weight of a deploy's canary (`manent_canary_weight`). */
  canaryWeight(deploy: DeployLabels, weight: number): void;
  /** One analysis measurement (`manent_analysis_measurements_total`, `manent_analysis_value`). */
  analysisMeasured(deploy: DeployLabels, m: { check: string; value: number | string | null; verdict: string }): void;
}

/** Which deploy a per-deploy metric is about. */
export interface DeployLabels {
  deploy: string;
  tenant: string;
  application: string;
  environment: string;
}

export const noMetrics: EngineMetrics = {
  deployFinished() {},
  targetFinished() {},
  stepAttempt() {},
  canaryWeight() {},
  analysisMeasured() {},
};
