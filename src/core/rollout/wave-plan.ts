import type { Target } from "../contract/index.js";
import type { WavesSettings } from "./rollout-config.js";

export interface PlannedWave {
  /** 1-based. */
  index: number;
  /** The label values shared by the wave's targets ("" for a target without the label). */
  labels: Record<string, string>;
  targets: Target[];
}

/**
 * Cuts targets into waves: grouped by the `by` labels (outermost first), values in the stated
 * `order` first and then in order of first appearance, each group cut into batches of at most
 * `batch_size`. Deterministic for the same targets and settings, so a resumed workflow plans the
 * same waves. Without settings, one wave holds every target.
 */
export function planWaves(targets: Target[], settings: WavesSettings | undefined): PlannedWave[] {
  if (targets.length === 0) return [];
  const by = settings?.by ?? [];
  const ranks = by.map((label) => rankOf(label, targets, settings?.order[label] ?? []));
  const keyed = targets.map((t, i) => ({ t, i, key: by.map((label, l) => ranks[l]!.get(t.labels[label] ?? "")!) }));
  keyed.sort((a, b) => compareKeys(a.key, b.key) || a.i - b.i);

  const groups: { labels: Record<string, string>; targets: Target[] }[] = [];
  let last: number[] | undefined;
  for (const k of keyed) {
    if (!last || compareKeys(last, k.key) !== 0) {
      groups.push({ labels: Object.fromEntries(by.map((label) => [label, k.t.labels[label] ?? ""])), targets: [] });
      last = k.key;
    }
    groups[groups.length - 1]!.targets.push(k.t);
  }

  const size = settings?.batch_size;
  const waves: PlannedWave[] = [];
  for (const g of groups) {
    const step = size ?? g.targets.length;
    for (let i = 0; i < g.targets.length; i += step)
      waves.push({ index: waves.length + 1, labels: g.labels, targets: g.targets.slice(i, i + step) });
  }
  return waves;
}

/** A wave's name for messages: "region=eu-west az=a" (or "all targets"), with its batch when cut. */
export function waveName(w: Pick<PlannedWave, "labels">): string {
  const parts = Object.entries(w.labels).map(([k, v]) => `${k}=${v || "(none)"}`);
  return parts.length ? parts.join(" ") : "all targets";
}

function rankOf(label: string, targets: Target[], order: string[]): Map<string, number> {
  const ranks = new Map<string, number>();
  for (const v of order) if (!ranks.has(v)) ranks.set(v, ranks.size);
  for (const t of targets) {
    const v = t.labels[label] ?? "";
    if (!ranks.has(v)) ranks.set(v, ranks.size);
  }
  return ranks;
}

function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
