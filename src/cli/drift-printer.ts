import type { DriftChange } from "../core/contract/index.js";
import type { TargetDriftRecord } from "../core/drift/drift-record.js";

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
