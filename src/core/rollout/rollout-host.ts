import type { DurableWaits } from "../engine/durable-waits.js";
import type { Capability, Deployer, HostedPlugin, Logger, Request, Result, Target, TargetRelease } from "../contract/index.js";
import type { DeployStore } from "../engine/deploy-store.js";
import type { EngineMetrics } from "../engine/engine-metrics.js";
import type { ResolvedDeploy, StepPolicy } from "../engine/resolve.js";
import type { StepContext } from "../engine/step-runner.js";
import type { Outbound } from "../artifacts/network.js";
import type { WebhookRequest } from "./webhook-call.js";

/** What a call is made on: a subset of the targets, and the traffic state PrepareSlots returned. */
export interface CallScope {
  targets: Target[];
  traffic?: Record<string, string>;
}

/**
 * What the rollout runners need from the deploy workflow: checkpointed steps, plugin calls with
 * secrets and progress, and the two units that change targets (deploy, roll back), so per-target
 * resume and other improvements of those units apply to waves as well.
 */
export interface RolloutHost {
  id: string;
  r: ResolvedDeploy;
  plugin: HostedPlugin;
  caps: Capability[];
  store: DeployStore;
  metrics: EngineMetrics;
  logger: Logger;
  /** Counts the rollout's durable waits (a shutdown does not wait for them). */
  waits?: DurableWaits;
  /** The server's address rules, applied to every URL an analysis check calls, and the request to the address they checked. */
  outbound: Outbound;
  /**
   * POSTs a webhook step's or the load-test hook's payload as JSON, to the address the server's
   * address rules checked (as `outbound`), redirects not followed. Resolves to the status of any
   * answer; throws analysis/http-request's NoAnswerError without one, AddressRefusedError when the
   * rules refuse the URL.
   */
  postWebhook(req: WebhookRequest): Promise<{ status: number }>;
  /** One checkpointed step, recorded on the deploy under `name`. */
  step<T>(name: string, policy: StepPolicy, fn: (ctx: StepContext) => Promise<T>): Promise<T>;
  /** A plugin call on `scope`, inside a step; target results are recorded under `phase`. */
  call<T>(phase: string, ctx: StepContext, scope: CallScope, fn: (deployer: Deployer, req: Request) => Promise<T>): Promise<T>;
  /** Deploys `targets` as one step named `name`. */
  deployTargets(name: string, targets: Target[]): Promise<Result>;
  /**
   * A call that changes targets on `scope` (a candidate's deploy) as one step named `name`,
   * resumed per target as a deploy is: run again, the plugin gets only the targets not done yet.
   */
  deployStep(name: string, scope: CallScope, fn: (deployer: Deployer, req: Request) => Promise<Result>): Promise<Result>;
  /** Returns `targets` to `releases` (the checkpoint's) in the rollback step. */
  rollbackTargets(targets: Target[], releases: TargetRelease[]): Promise<Result>;
}
