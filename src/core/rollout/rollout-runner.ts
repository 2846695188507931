import { DBOS } from "@dbos-inc/dbos-sdk";
import { TargetStatus, targetId, type Result, type TargetRelease, type TargetResult } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import type { DeployStatus } from "../engine/deploy-store.js";
import { isCancellation } from "../engine/step-runner.js";
import { runAnalysis } from "./analysis-runner.js";
import { CanaryFailure, runCanary } from "./canary-runner.js";
import { CommandInbox } from "./command-inbox.js";
import { BackgroundAnalysis } from "./background-analysis.js";
import { abortedBy, backgroundStopped, runGate } from "./gate-runner.js";
import { describeStep, stepKind, type Gate } from "./rollout-config.js";
import type { RolloutHost } from "./rollout-host.js";
import { RolloutRecorder } from "./rollout-recorder.js";
import type { WaveStatus } from "./rollout-state.js";
import { planWaves, waveName, type PlannedWave } from "./wave-plan.js";
import { runWebhookGate } from "./webhook-gate.js";

export interface RolloutCheckpoint {
  releases: TargetRelease[];
  can_rollback: boolean;
  no_rollback_reason?: string;
}

export interface RolloutOutcome {
  status: DeployStatus;
  error?: ManentError;
}

/** The step record that sums up every wave's targets, under the name a deploy without waves uses. */
const summaryStep = "deploy";

/**
 * A deploy with rollout settings: its targets in waves (one wave without wave settings), each
 * deployed with the plugin's deploy or as a canary, with the gates between waves. A failure, a
 * failed gate or an abort stops the rollout: the running canary is reverted, every target changed
 * by the earlier waves (and by the failed wave, without a canary) goes back to the checkpoint,
 * later waves are never touched and reported `skipped`.
 */
export async function runRollout(host: RolloutHost, checkpoint: RolloutCheckpoint): Promise<RolloutOutcome> {
  const settings = host.r.rollout!;
  const withWaves = settings.waves !== undefined;
  const waves = planWaves(host.r.targets, settings.waves);
  const rec = new RolloutRecorder(host.store, host.metrics, host.id, host.r);
  rec.state.waves = withWaves
    ? waves.map((w) => ({ index: w.index, name: waveName(w), labels: w.labels, hosts: w.targets.map(targetId), status: "pending" }))
    : [];
  const previousVersion = checkpoint.releases.find((r) => r.version !== "")?.version;
  const background = settings.background_analysis
    ? new BackgroundAnalysis(host, rec, settings.background_analysis, previousVersion)
    : undefined;
  await rec.save();
  const inbox = new CommandInbox(host.waits, background);
  const results = new Map<string, TargetResult>();
  await DBOS.runStep(() => host.store.stepStarted(host.id, 6, summaryStep), { name: `${summaryStep}:start` });

  let completed = 0;
  try {
    for (const w of waves) {
      if (w.index > 1) await runBetween(host, rec, inbox, settings.waves?.between ?? [], w.index - 1, previousVersion);
      // Spanning the waves without a canary: from the start of the first wave.
      if (background?.settings.waves && !settings.canary) await background.start(`wave ${w.index}`);
      rec.state.current_wave = w.index;
      setStatus(rec, w.index, "running");
      await rec.save();
      const prefix = withWaves ? `wave-${w.index}:` : "";
      const result: Result = settings.canary
        ? await runCanary(host, rec, inbox, settings.canary, w.targets, withWaves ? w.index : null, prefix, previousVersion, background)
        : await host.deployTargets(`${prefix}deploy`, w.targets);
      for (const t of result.targets) results.set(t.host, t);
      setStatus(rec, w.index, "succeeded");
      completed = w.index;
      await rec.save();
    }
    const failed = await inbox.checkBackground();
    if (failed !== undefined) throw backgroundStopped(failed, `the end of wave ${completed}`);
    await background?.stop();
    // Every target runs the new release: the post-promotion checks, whose failure rolls every wave back (as a failed gate does).
    if (settings.post_promotion_analysis)
      await runAnalysis(
        host,
        rec,
        inbox,
        "post-promotion:analysis",
        "post-promotion analysis",
        settings.post_promotion_analysis.checks,
        previousVersion,
      );
    await summarize(host, waves, results, "succeeded");
    return { status: "succeeded" };
  } catch (err) {
    if (isCancellation(err)) throw err;
    await background?.stop();
    return stop(host, rec, waves, withWaves, completed, checkpoint, results, err);
  }
}

/** Gates between wave `after` and the next; an abort sent during the waves is acted on here. */
async function runBetween(
  host: RolloutHost,
  rec: RolloutRecorder,
  inbox: CommandInbox,
  gates: Gate[],
  after: number,
  previousVersion: string | undefined,
): Promise<void> {
  const checkAbort = async (where: string): Promise<void> => {
    await inbox.poll();
    if (inbox.aborted) throw abortedBy(inbox.aborted, where);
    const failed = await inbox.checkBackground();
    if (failed !== undefined) throw backgroundStopped(failed, where);
  };
  for (const [g, gate] of gates.entries()) {
    const label = `gate ${g + 1} after wave ${after} (${describeStep(gate)})`;
    await checkAbort(label);
    if (inbox.promotedFull && !("approval" in gate && gate.approval.approvers)) continue;
    const name = `wave-${after}:gate-${g + 1}:${stepKind(gate)}`;
    if ("pause" in gate) await runGate(host, rec, inbox, name, label, "pause", gate.pause.duration);
    else if ("approval" in gate) await runGate(host, rec, inbox, name, label, "approval", gate.approval.timeout, gate.approval.approvers);
    else if ("webhook" in gate)
      await runWebhookGate(host, rec, inbox, name, label, `rollout.waves.between.${g}.webhook.url`, gate.webhook, previousVersion);
    else await runAnalysis(host, rec, inbox, name, label, gate.analysis.checks, previousVersion);
  }
  await checkAbort(`the start of wave ${after + 1}`);
}

async function stop(
  host: RolloutHost,
  rec: RolloutRecorder,
  waves: PlannedWave[],
  withWaves: boolean,
  completed: number,
  checkpoint: RolloutCheckpoint,
  results: Map<string, TargetResult>,
  err: unknown,
): Promise<RolloutOutcome> {
  const canaryFailure = err instanceof CanaryFailure ? err : undefined;
  const cause = canaryFailure ? canaryFailure.error : ManentError.from(err);
  const running =
    rec.state.current_wave !== null && rec.state.waves[rec.state.current_wave - 1]?.status === "running"
      ? rec.state.current_wave
      : undefined;
  const failedAt = running ?? completed;
  // A canary reverts its own wave; a plain wave is rolled back with the ones before it.
  const toRollBack = waves.filter((w) => w.index <= (canaryFailure ? completed : failedAt));
  const wave = waves[failedAt - 1];
  const where = withWaves && wave ? (running ? `wave ${failedAt} (${waveName(wave)}) failed: ` : `after wave ${failedAt}: `) : "";
  const parts = [`${where}${cause.message}`];
  for (const w of waves) if (w.index > failedAt) setStatus(rec, w.index, "skipped");
  if (running) {
    setStatus(rec, running, canaryFailure?.reverted ? "rolled_back" : "failed");
    const reverted = canaryFailure?.reverted ? TargetStatus.RolledBack : TargetStatus.Failed;
    for (const t of waves[running - 1]!.targets)
      if (!results.has(targetId(t))) results.set(targetId(t), { host: targetId(t), status: reverted });
  }

  let rolledBack = canaryFailure ? canaryFailure.reverted : true;
  if (toRollBack.length > 0) {
    const range = toRollBack.length === 1 ? `wave ${toRollBack[0]!.index}` : `waves 1-${toRollBack[toRollBack.length - 1]!.index}`;
    const what = withWaves ? range : "every target";
    if (!checkpoint.can_rollback) {
      parts.push(`${what} not rolled back: ${checkpoint.no_rollback_reason ?? "no checkpoint"}`);
      rolledBack = false;
    } else {
      const targets = toRollBack.flatMap((w) => w.targets);
      const ids = new Set(targets.map(targetId));
      try {
        await host.rollbackTargets(
          targets,
          checkpoint.releases.filter((r) => ids.has(r.host)),
        );
        for (const w of toRollBack) setStatus(rec, w.index, "rolled_back");
        for (const t of targets) results.set(targetId(t), { host: targetId(t), status: TargetStatus.RolledBack });
        parts.push(withWaves ? `${range} rolled back` : "rollback completed");
      } catch (rollbackErr) {
        if (isCancellation(rollbackErr)) throw rollbackErr;
        parts.push(`rollback of ${what} failed: ${ManentError.from(rollbackErr).message}`);
        rolledBack = false;
      }
    }
  }
  const skipped = waves.filter((w) => w.index > failedAt);
  if (withWaves && skipped.length > 0)
    parts.push(
      skipped.length === 1
        ? `wave ${skipped[0]!.index} skipped`
        : `waves ${skipped[0]!.index}-${skipped[skipped.length - 1]!.index} skipped`,
    );
  const message = parts.join("; ");
  rec.state.message = message;
  await rec.save();
  // A cancel that reached a rollout is reported as what it did: the targets were changed, then put back.
  const status: DeployStatus = rolledBack ? "rolled_back" : "failed";
  await summarize(host, waves, results, "failed");
  return { status, error: new ManentError(cause.code, message, { details: cause.details }) };
}

/** Writes the summary step: every target's result, `skipped` for the targets no wave reached. */
async function summarize(
  host: RolloutHost,
  waves: PlannedWave[],
  results: Map<string, TargetResult>,
  status: "succeeded" | "failed",
): Promise<void> {
  const targets = waves
    .flatMap((w) => w.targets)
    .map((t) => results.get(targetId(t)) ?? { host: targetId(t), status: TargetStatus.Skipped });
  const summary: Result = { plugin: host.plugin.name, targets };
  await DBOS.runStep(() => host.store.stepFinished(host.id, summaryStep, status, summary), { name: `${summaryStep}:end` });
}

function setStatus(rec: RolloutRecorder, index: number, status: WaveStatus): void {
  const w = rec.state.waves[index - 1];
  if (w) w.status = status;
}
