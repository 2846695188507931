import {
  isHeaderRouter,
  isRequestMirror,
  isSlotDeployer,
  isSlotScaler,
  isTesterRouter,
  isTrafficRouter,
  TargetStatus,
  targetId,
  type Deployer,
  type Request,
  type Result,
  type Target,
} from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import { isCancellation } from "../engine/step-runner.js";
import { runAnalysis } from "./analysis-runner.js";
import { CommandInbox } from "./command-inbox.js";
import type { BackgroundAnalysis } from "./background-analysis.js";
import { abortedBy, backgroundStopped, runGate, RolloutStopped } from "./gate-runner.js";
import { describeStep, stepKind, type CanarySettings } from "./rollout-config.js";
import { headerRouteOf } from "./traffic-steps.js";
import type { CallScope, RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";
import type { CanaryState } from "./rollout-state.js";
import { runWebhookGate } from "./webhook-gate.js";

/** A canary that ended early; `reverted` tells whether weight 0 and RevertCandidate went through. */
export class CanaryFailure extends Error {
  constructor(
    readonly error: ManentError,
    readonly reverted: boolean,
  ) {
    super(error.message);
  }
}

/**
 * One percentage rollout on `targets`: PrepareSlots (its state passed to every later call),
 * DeployCandidate, RouteTesters, the envconfig's steps, PromoteCandidate, RetirePrevious. Every
 * plugin call is its own checkpointed step. On a failure, a failed gate or an abort: weight 0,
 * then RevertCandidate, and a {@link CanaryFailure} naming the step and why.
 */
export async function runCanary(
  host: RolloutHost,
  rec: RolloutRecorder,
  inbox: CommandInbox,
  settings: CanarySettings,
  targets: Target[],
  wave: number | null,
  prefix: string,
  previousVersion: string | undefined,
  background?: BackgroundAnalysis,
): Promise<Result> {
  const policy = host.r.steps.deploy;
  const state: CanaryState = {
    wave,
    steps: settings.steps.map(describeStep),
    step: 0,
    phase: "preparing",
    weight: 0,
    traffic: null,
    testers: null,
  };
  rec.state.canary = state;
  await rec.save();
  const scope: CallScope = { targets };
  const slots = async (d: Deployer) => {
    if (!isSlotDeployer(d)) throw new ManentError(Code.Unimplemented, `plugin ${host.plugin.name} has no slots`);
    return d;
  };
  /** One plugin call as one step. */
  const call = <T>(name: string, phase: string, fn: (d: Deployer, req: Request) => Promise<T>) =>
    host.step(`${prefix}${name}`, policy, (ctx) => host.call(phase, ctx, scope, fn));
  const checkAbort = async (where: string): Promise<void> => {
    await inbox.poll();
    if (inbox.aborted) throw abortedBy(inbox.aborted, where);
    const failed = await inbox.checkBackground();
    if (failed !== undefined) throw backgroundStopped(failed, where);
  };

  let where = "prepare_slots";
  let prepared = false;
  try {
    const traffic = await call("prepare_slots", "prepare_slots", async (d, req) => (await slots(d)).prepareSlots(req));
    prepared = true;
    scope.traffic = traffic;
    state.traffic = traffic;
    state.phase = "deploying_candidate";
    await rec.save();

    await checkAbort((where = "deploy_candidate"));
    // Resumed per target, as a deploy is: a server that died during a wave's candidates gives the plugin only those not done.
    const result = await host.deployStep(`${prefix}deploy_candidate`, scope, async (d, req) => (await slots(d)).deployCandidate(req));
    if (settings.testers) {
      await checkAbort((where = "route_testers"));
      state.testers = await call("route_testers", "route_testers", async (d, req) => {
        if (!isTesterRouter(d)) throw new ManentError(Code.Unimplemented, `plugin ${host.plugin.name} cannot route testers`);
        return d.routeTesters(req);
      });
    }
    state.phase = "stepping";
    await rec.save();

    for (const [i, step] of settings.steps.entries()) {
      where = `canary step ${i + 1} (${describeStep(step)})`;
      await checkAbort(where);
      // `promote --full` skips every remaining step but an approval that names its approvers.
      if (inbox.promotedFull && !("approval" in step && step.approval.approvers)) continue;
      state.step = i + 1;
      await rec.save();
      if (background && i + 1 >= background.settings.starting_step) await background.start(where);
      const name = `${prefix}canary-${i + 1}:${stepKind(step)}`;
      if ("set_weight" in step) {
        await host.step(name, policy, (ctx) => host.call("set_weight", ctx, scope, (d, req) => setWeight(host, d, req, step.set_weight)));
        rec.weight(step.set_weight);
        await rec.save();
      } else if ("set_header_route" in step) {
        const route = headerRouteOf(step.set_header_route);
        await call(`canary-${i + 1}:set_header_route`, "set_header_route", async (d, req) => {
          if (!isHeaderRouter(d)) throw new ManentError(Code.Unimplemented, `plugin ${host.plugin.name} cannot route by header or cookie`);
          await d.setHeaderRoute(req, route);
        });
      } else if ("set_mirror" in step) {
        await call(`canary-${i + 1}:set_mirror`, "set_mirror", async (d, req) => {
          if (!isRequestMirror(d)) throw new ManentError(Code.Unimplemented, `plugin ${host.plugin.name} cannot mirror requests`);
          await d.setMirror(req, step.set_mirror);
        });
      } else if ("pause" in step) {
        await runGate(host, rec, inbox, name, where, "pause", step.pause.duration);
      } else if ("approval" in step) {
        await runGate(host, rec, inbox, name, where, "approval", step.approval.timeout, step.approval.approvers);
      } else if ("webhook" in step) {
        await runWebhookGate(host, rec, inbox, name, where, `rollout.canary.steps.${i}.webhook.url`, step.webhook, previousVersion);
      } else {
        await runAnalysis(host, rec, inbox, name, where, step.analysis.checks, previousVersion);
      }
    }
    state.step = settings.steps.length + 1;
    await checkAbort((where = "promote_candidate"));
    // Within the canary only, unless it spans the waves: the promoted candidate is the release now.
    if (background && !background.settings.waves) await background.stop();
    state.phase = "promoting";
    await rec.save();
    await call("promote_candidate", "promote_candidate", async (d, req) => (await slots(d)).promoteCandidate(req));
    rec.weight(100);
    state.phase = "promoted";
    await rec.save();
    where = "retire_previous";
    await call("retire_previous", "retire_previous", async (d, req) => (await slots(d)).retirePrevious(req));
    return result;
  } catch (err) {
    if (isCancellation(err)) throw err;
    const e = ManentError.from(err);
    const cause = err instanceof RolloutStopped ? e : new ManentError(e.code, `${where} failed: ${e.message}`, { details: e.details });
    if (!prepared) throw new CanaryFailure(cause, true);
    await background?.stop();
    state.phase = "reverting";
    state.step = Math.min(state.step, settings.steps.length);
    await rec.save();
    // Weight 0 first, so traffic leaves the candidate before it goes. RevertCandidate runs even when
    // that fails (a candidate that never became ready cannot be scaled, a route the token may not
    // patch): it removes the candidate whatever its state and puts the stable release back alone.
    let weightError: ManentError | undefined;
    try {
      await call("revert:set_weight_0", "set_weight", (d, req) => setWeight(host, d, req, 0));
      rec.weight(0);
    } catch (weightErr) {
      if (isCancellation(weightErr)) throw weightErr;
      weightError = ManentError.from(weightErr);
    }
    if (settings.abort_scale_down_delay)
      await keepCandidate(host, rec, `${prefix}revert:keep_candidate`, where, settings.abort_scale_down_delay);
    try {
      await call("revert_candidate", "revert_candidate", async (d, req) => {
        await (await slots(d)).revertCandidate(req);
        // RevertCandidate returns no targets: each is recorded reverted here, or the API and the
        // web UI would go on listing the candidate's targets as `deployed` after an abort.
        for (const t of req.targets) req.progress?.({ host: targetId(t), status: TargetStatus.RolledBack });
      });
    } catch (revertErr) {
      if (isCancellation(revertErr)) throw revertErr;
      const r = ManentError.from(revertErr);
      const weight = weightError ? `; weight 0 failed: ${weightError.message}` : "";
      throw new CanaryFailure(
        new ManentError(cause.code, `${cause.message}${weight}; revert failed: ${r.message}`, { details: cause.details }),
        false,
      );
    }
    rec.weight(0);
    state.phase = "reverted";
    await rec.save();
    const how = weightError ? `weight 0 failed (${weightError.message}), candidate reverted` : "weight 0, candidate reverted";
    throw new CanaryFailure(new ManentError(cause.code, `${cause.message}; ${how}`, { details: cause.details }), true);
  }
}

/**
 * `abort_scale_down_delay`: the candidate stays (with weight 0) for inspection, as a durable pause
 * (its deadline checkpointed, so a restarted server waits only what remains, then removes it). The
 * abort that stopped the rollout is in the main inbox; this wait has its own, so a promote (or a
 * second abort) sent now ends it early and the candidate goes at once.
 */
async function keepCandidate(host: RolloutHost, rec: RolloutRecorder, name: string, where: string, delayMs: number): Promise<void> {
  try {
    await runGate(host, rec, new CommandInbox(host.waits), name, `candidate kept after ${where}`, "pause", delayMs);
  } catch (err) {
    if (isCancellation(err) || !(err instanceof RolloutStopped)) throw err;
  }
}

/**
 * Moves the candidate to `weight`: traffic through the router, capacity through the scaler; with a
 * scaler and no router, the weight is the candidate's share of capacity only.
 */
async function setWeight(host: RolloutHost, d: Deployer, req: Request, weight: number): Promise<void> {
  const router = host.caps.includes("traffic_router") && isTrafficRouter(d);
  const scaler = host.caps.includes("scale") && isSlotScaler(d);
  if (!router && !scaler)
    throw new ManentError(Code.Unimplemented, `plugin ${host.plugin.name} can neither route traffic nor scale the candidate`);
  // Scale up before moving traffic, and traffic off before scaling down, so the candidate never gets traffic it has no capacity for.
  const current = host.caps.includes("traffic_router") && isTrafficRouter(d) ? await d.candidateWeight(req) : undefined;
  const up = current === undefined || weight >= current;
  if (up && scaler) await d.scaleCandidate(req, weight);
  if (router) await d.setCandidateWeight(req, weight);
  if (!up && scaler) await d.scaleCandidate(req, weight);
}
