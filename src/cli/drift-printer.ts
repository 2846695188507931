import type { DriftChange } from "../core/contract/index.js";
import type { TargetDriftRecord } from "../core/drift/drift-record.js";
import type { EnvconfigComparison } from "../core/drift/envconfig-change.js";
import { envconfigOrigin } from "./envconfig-origin.js";

/**
 * Drift as people read it, one line per target then one per change:
 *   web-1: drifted (runs 1.0.0, deployed 1.0.0)
 *     index.html sha256: 5f0c2a9e41b7… → 9d1e7c3b2a60…
 *     ConfigMap/hello-config data.greeting: hello → edited by hand
 *     ignored: Deployment/hello spec.replicas: 3 → 5 (HorizontalPodAutoscaler/hello)
 * A target whose plugin cannot tell is "drift unknown", with why.
 */
export function driftLines(targets: TargetDriftRecord[]): string[] {
  const lines: string[] = [];
  for (const t of targets) {
    lines.push(`${t.target}: ${stateText(t)}`);
    for (const c of t.changes) lines.push(`  ${changeText(c)}`);
    // A server from before drift.ignore sends no `ignored`.
    for (const c of t.ignored ?? []) lines.push(`  ignored: ${changeText(c)} (${c.reason})`);
  }
  return lines;
}

function stateText(t: TargetDriftRecord): string {
  switch (t.state) {
    case "in_sync":
      return `in sync (runs ${t.live_version || "nothing"})`;
    case "drifted":
      return `drifted (runs ${t.live_version || "nothing"}, deployed ${t.expected_version || "nothing"})`;
    case "unknown":
      return `drift unknown${t.reason ? `: ${t.reason}` : ""}`;
    case "error":
      return `drift check failed: ${t.reason ?? "unknown error"}`;
  }
}

function changeText(c: DriftChange): string {
  const value = (v: string): string => (v === "" ? "(absent)" : c.field === "sha256" && v.length === 64 ? `${v.slice(0, 12)}…` : v);
  return `${c.object}${c.field ? ` ${c.field}` : ""}: ${value(c.expected)} → ${value(c.live)}`;
}

/**
 * The envconfig change a new deploy would bring, as `manent diff` ends:
 *   envconfig: changed since the release (git …@3f2c1a9e0b12 … → git …@9d1e7c3b2a60 …)
 *     params.replicas: 2 → 3
 *     targets.web-3.host: (absent) → web-3
 */
export function envconfigLines(c: EnvconfigComparison): string[] {
  const now = c.current ? envconfigOrigin(c.current) : "none";
  if (c.changes === null) return [`envconfig: ${now} (the release recorded no settings to compare with)`];
  const since = c.deployed ? envconfigOrigin(c.deployed) : "none";
  if (c.changes.length === 0) {
    const same = c.deployed?.sha256 === c.current?.sha256 ? "" : `, from ${since}`;
    return [`envconfig: a new deploy runs the release's settings (${now}${same})`];
  }
  const value = (v: string): string => (v === "" ? "(absent)" : v);
  return [
    `envconfig: a new deploy changes ${c.changes.length} setting${c.changes.length === 1 ? "" : "s"} (${since} → ${now})`,
    ...c.changes.map((x) => `  ${x.field}: ${value(x.deployed)} → ${value(x.current)}`),
  ];
}
