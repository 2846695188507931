import { Code, ManentError } from "../errors.js";
import { TargetStatus, targetId, type Request, type Target, type TargetResult } from "./types.js";

/** What the per-target function returns; `host` defaults to the target's identity ({@link targetId}), `status` to `deployed`. */
export type TargetOutcome = Partial<TargetResult>;
export type TargetFn = (target: Target, signal: AbortSignal) => Promise<TargetOutcome>;

export interface TargetsOutcome {
  /** One result per target, in the order of `req.targets`. */
  targets: TargetResult[];
  /** The failure, when any target failed; undefined when all succeeded. */
  error?: ManentError;
}

/**
 * Runs `fn` on each target, `req.parallelism` at a time. After the first error no further target
 * is started; the running ones finish. Targets never started are reported as `skipped`.
 */
export function forEachTarget(
  req: Pick<Request, "targets" | "parallelism" | "signal" | "progress">,
  fn: TargetFn,
): Promise<TargetsOutcome> {
  return runTargets(req, fn, true);
}

/** Like {@link forEachTarget} but runs every target whatever fails (rollbacks, dry-runs). */
export function forAllTargets(
  req: Pick<Request, "targets" | "parallelism" | "signal" | "progress">,
  fn: TargetFn,
): Promise<TargetsOutcome> {
  return runTargets(req, fn, false);
}

async function runTargets(
  req: Pick<Request, "targets" | "parallelism" | "signal" | "progress">,
  fn: TargetFn,
  stopOnError: boolean,
): Promise<TargetsOutcome> {
  const targets = req.targets;
  const results: (TargetResult | undefined)[] = new Array<TargetResult | undefined>(targets.length);
  const errors: ManentError[] = [];
  let next = 0;
  let stopped = false;

  const worker = async (): Promise<void> => {
    while (!stopped && !req.signal.aborted && next < targets.length) {
      const index = next++;
      const target = targets[index]!;
      const started = performance.now();
      try {
        const outcome = await fn(target, req.signal);
        results[index] = {
          ...outcome,
          host: outcome.host ?? targetId(target),
          status: outcome.status ?? TargetStatus.Deployed,
          duration_ms: Math.round(performance.now() - started),
        };
        req.progress?.(results[index]);
      } catch (err) {
        const e = ManentError.from(err);
        errors.push(e);
        results[index] = {
          host: targetId(target),
          status: TargetStatus.Failed,
          error: e.message,
          duration_ms: Math.round(performance.now() - started),
        };
        req.progress?.(results[index]);
        if (stopOnError) stopped = true;
      }
    }
  };

  const width = Math.max(1, Math.min(req.parallelism || 1, targets.length));
  await Promise.all(Array.from({ length: width }, worker));

  // Array.from, not map: map skips the holes that never-started targets leave.
  const out: TargetResult[] = Array.from(results, (r, i) => r ?? { host: targetId(targets[i]!), status: TargetStatus.Skipped });
  if (errors.length === 0 && req.signal.aborted && out.some((r) => r.status === TargetStatus.Skipped)) {
    return { targets: out, error: new ManentError(Code.Canceled, "deploy cancelled before every target was started") };
  }
  return errors.length === 0 ? { targets: out } : { targets: out, error: combine(errors) };
}

/** One error for several failed targets: their code when they share one; else permanent only if every failure is. */
function combine(errors: ManentError[]): ManentError {
  if (errors.length === 1) return errors[0]!;
  const first = errors[0]!.code;
  const code = errors.every((e) => e.code === first) || errors.every((e) => e.permanent) ? first : Code.Unavailable;
  return new ManentError(code, `${errors.length} targets failed: ${errors.map((e) => e.message).join("; ")}`);
}

/**
 * Names each item (a result, a release) by its target's identity, for plugins that name them by
 * host (built before target names): an item whose `host` is no target's identity but some
 * targets' host goes to the first of those targets not named yet, in order. Items already named
 * by identity, and ones that match nothing, are kept as they are.
 */
export function byTargetId<T extends { host: string }>(targets: readonly Target[], items: T[]): T[] {
  const ids = new Set(targets.map(targetId));
  if (items.every((i) => ids.has(i.host))) return items;
  const claimed = new Set(items.filter((i) => ids.has(i.host)).map((i) => i.host));
  return items.map((item) => {
    if (ids.has(item.host)) return item;
    const t = targets.find((x) => x.host === item.host && !claimed.has(targetId(x)));
    if (!t) return item;
    claimed.add(targetId(t));
    return { ...item, host: targetId(t) };
  });
}
