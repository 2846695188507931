import type { EnvconfigOrigin } from "../config/index.js";
import { recordedSettings, type RecordedSettings, type ResolvedDeploy } from "../engine/resolve.js";

/** One setting a deploy now would run differently from the release: "" for a side that has none. */
export interface EnvconfigChange {
  /** Dotted: `params.replicas`, `targets.web-3.host` (targets by identity), `rollout.canary.steps.1.set_weight`. */
  field: string;
  deployed: string;
  current: string;
}

/** What `manent diff` tells of the envconfig: where each side came from and what a new deploy would change. */
export interface EnvconfigComparison {
  /** Where the release's envconfig came from (null: none found, or recorded before manent kept it). */
  deployed: EnvconfigOrigin | null;
  /** Where a deploy submitted now would read it. */
  current: EnvconfigOrigin | null;
  /** The settings that differ, in field order; null when the release's deploy recorded none to compare with. */
  changes: EnvconfigChange[] | null;
}

// Where the envconfig came from is told apart (`deployed`, `current`), not as a change of settings.
const notSettings = new Set(["envconfigFile", "envconfigOrigin"]);

/**
 * Compares what the release ran with what a deploy now would. `withRollout`: both sides resolved
 * a rollout (a rollback runs none), else the rollout and analysis are left out of the comparison.
 */
export function compareEnvconfig(
  deployed: ResolvedDeploy | undefined,
  current: RecordedSettings,
  opts: { withRollout: boolean },
): EnvconfigComparison {
  const skip = new Set([...notSettings, ...(opts.withRollout ? [] : ["rollout", "analysis"])]);
  const before = deployed && flatten(recordedSettings(deployed), skip);
  const after = flatten(current, skip);
  const changes = before
    ? [...new Set([...before.keys(), ...after.keys()])]
        .sort()
        .filter((field) => before.get(field) !== after.get(field))
        .map((field) => ({ field, deployed: before.get(field) ?? "", current: after.get(field) ?? "" }))
    : null;
  return { deployed: deployed?.envconfigOrigin ?? null, current: current.envconfigOrigin ?? null, changes };
}

/** Leaves as dotted paths; targets keyed by their identity, so a target added in the middle is one change. */
function flatten(settings: RecordedSettings, skip: ReadonlySet<string>): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (value: unknown, path: string): void => {
    if (value === undefined) return;
    if (value === null || typeof value !== "object") {
      out.set(path, String(value));
      return;
    }
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
    for (const [k, v] of entries) walk(v, path ? `${path}.${k}` : k);
  };
  for (const [k, v] of Object.entries(settings)) {
    if (skip.has(k)) continue;
    if (k === "targets") for (const t of settings.targets) walk({ ...t, name: undefined }, `targets.${t.name ?? t.host}`);
    else walk(v, k);
  }
  return out;
}
