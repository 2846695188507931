import { Code } from "../errors.js";
import { judge, measure, type AnalysisCheck, type Measurement } from "./analysis/index.js";
import type { CommandInbox } from "./command-inbox.js";
import { abortedBy, backgroundStopped, RolloutStopped } from "./gate-runner.js";
import { runLoadTest } from "./load-test-hook.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";

/**
 * An analysis step or gate: each check measured every `interval` until `judge` says it succeeded
 * or failed. Each round of measurements is one checkpointed step and each wait a durable one, so a
 * server killed during an analysis resumes at the exact measurement. Every measurement is recorded
 * on the deploy and in the metrics. Throws {@link RolloutStopped} naming the check, the value and
 * the condition when a check fails, or on an abort; a `promote --full` skips what remains.
 */
export async function runAnalysis(
  host: RolloutHost,
  rec: RolloutRecorder,
  inbox: CommandInbox,
  name: string,
  label: string,
  checkNames: string[],
  previousVersion: string | undefined,
): Promise<void> {
  const checks = new Map<string, AnalysisCheck>(checkNames.map((n) => [n, host.r.analysis!.checks[n]!]));
  const taken = new Map<string, Measurement[]>(checkNames.map((n) => [n, []]));
  const next = new Map<string, number>(checkNames.map((n) => [n, 0]));
  const running = new Set(checkNames);
  const vars: Record<string, string> = {
    MANENT_VERSION: host.r.artifact.version,
    MANENT_APPLICATION: host.r.application,
    MANENT_ENVIRONMENT: host.r.environment,
    MANENT_TENANT: host.r.tenant,
    MANENT_WEIGHT: String(rec.state.canary?.weight ?? 0),
    ...(previousVersion && { MANENT_PREVIOUS_VERSION: previousVersion }),
  };
  await runLoadTest(host, rec, `${name}:load_test`, label, previousVersion);
  let now = 0;
  for (let round = 1; ; round++) {
    await inbox.poll();
    if (inbox.aborted) throw abortedBy(inbox.aborted, label);
    if (inbox.promotedFull) return;
    const due = [...running].filter((n) => next.get(n)! <= now);
    const step = `${name}:${round}`;
    const out = await host.step(step, { maxRetries: 0, intervalMs: 0 }, async (ctx) => ({
      measurements: await Promise.all(due.map((n) => measure(n, checks.get(n)!, vars, ctx.signal, host.outbound))),
      at: Date.now(),
    }));
    for (const m of out.measurements) {
      taken.get(m.check)!.push(m);
      next.set(m.check, out.at + checks.get(m.check)!.interval);
      rec.state.measurements.push({ step: name, ...m });
      host.metrics.analysisMeasured(rec.labels(), m);
    }
    await rec.save();
    for (const n of due) {
      const j = judge(checks.get(n)!, taken.get(n)!);
      if (j.state === "failed") {
        const stopped = new RolloutStopped(Code.Aborted, `${label} failed: ${j.reason ?? `check ${n} failed`}`);
        // The round's step returned its measurements (its checkpoint, replayed on a resume) before they
        // were judged, so its record said succeeded: it is the round that failed, with what it measured.
        await host.store.stepFinished(host.id, step, "failed", out, stopped.toJSON());
        throw stopped;
      }
      if (j.state === "successful") running.delete(n);
    }
    if (running.size === 0) return;
    const until = Math.min(...[...running].map((n) => next.get(n)!));
    const outcome = await inbox.wait("analysis", until);
    if (outcome.ended === "background") throw backgroundStopped(outcome.reason, label);
    if (outcome.ended === "command") {
      if (outcome.message.command === "abort") throw abortedBy(outcome.message, label);
      return; // promote --full
    }
    // Which checks are due is decided from the recorded deadline, never the clock, so a replay takes the same path.
    now = until;
  }
}
