import { TargetStatus, targetId, type Result, type Target, type TargetResult } from "../contract/index.js";
import type { DeployStore } from "./deploy-store.js";

/** What is left of a call on `targets` after earlier runs of the same step. */
export interface PendingTargets {
  /** Results recorded by earlier runs for targets that are done (`deployed` or `unchanged`). */
  done: TargetResult[];
  /** The targets the plugin still has to work on, in their order. */
  todo: Target[];
}

const doneStatuses: ReadonlySet<string> = new Set([TargetStatus.Deployed, TargetStatus.Unchanged]);

/**
 * Per-target resume of a deploy step. Each target's result is recorded as it finishes
 * (TargetRecorder), after the plugin did the target's work; when the step runs again (the server
 * died before it was checkpointed, or an attempt failed and is retried), only the targets not done
 * go to the plugin, and the recorded results of the others are kept.
 *
 * So each target is deployed at least once and, unless the server dies between a target's effect
 * and its record, exactly once per successful attempt. A retried attempt deploys the failed and
 * never-started targets again, not the ones that succeeded. Rollbacks are not affected: they act
 * on every target of the deploy (or of the waves reached), done before a crash or after.
 */
export async function pendingTargets(store: DeployStore, deployId: string, phase: string, targets: Target[]): Promise<PendingTargets> {
  const recorded = await store.doneTargets(deployId, phase);
  if (recorded.length === 0) return { done: [], todo: targets };
  // Results name their target by its identity (TargetResult.host), so two targets on one host are two entries.
  const byId = new Map(recorded.filter((r) => doneStatuses.has(r.status)).map((r) => [r.host, r]));
  const done: TargetResult[] = [];
  const todo: Target[] = [];
  for (const t of targets) {
    const r = byId.get(targetId(t));
    if (r) done.push(r);
    else todo.push(t);
  }
  return { done, todo };
}

/** The step's result over all its targets: the recorded results of the done ones with the call's, in the order of `targets`. */
export function mergeResults(targets: Target[], done: TargetResult[], call: Result): Result {
  if (done.length === 0) return call;
  const byId = new Map<string, TargetResult>(done.map((r) => [r.host, r]));
  for (const r of call.targets) byId.set(r.host, r);
  const merged = targets.map((t) => byId.get(targetId(t)) ?? { host: targetId(t), status: TargetStatus.Skipped });
  return { ...call, targets: merged };
}
