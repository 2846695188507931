import type { TargetResult } from "../contract/index.js";
import type { DeployKind, DeployStatus } from "./deploy-store.js";

/** What the engine reports to metrics; the server implements it with prom-client. */
export interface EngineMetrics {
  deployFinished(kind: DeployKind, status: DeployStatus, seconds: number): void;
  /** Fed from every target result (`manent_target_deploy_seconds`). */
  targetFinished(plugin: string, phase: string, result: TargetResult): void;
  stepAttempt(step: string, outcome: "succeeded" | "failed"): void;
}

export const noMetrics: EngineMetrics = {
  deployFinished() {},
  targetFinished() {},
  stepAttempt() {},
};
