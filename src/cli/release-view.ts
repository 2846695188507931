import type { ReleaseRecord, StageState } from "../core/release/release-store.js";
import { plain, type Painter } from "./output/colour.js";

/** "4 min 10 s", "1 h 5 min", "3 s": what remains until `until` (never negative). */
export function timeLeft(until: string, now: number): string {
  const s = Math.max(0, Math.ceil((Date.parse(until) - now) / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

function stageNotes(s: StageState, now: number): string[] {
  return [
    s.done_by ? `done by release ${s.done_by}` : "",
    ...s.deploys.map((d) => `deploy ${d.deploy_id} ${d.status}`),
    s.promoted_by ? `promoted by ${s.promoted_by}` : "",
    s.approvals.length > 0 ? `approved by ${s.approvals.map((a) => a.by).join(", ")}` : "",
    s.soak_until ? `soak until ${s.soak_until}${s.status === "soaking" ? ` (${timeLeft(s.soak_until, now)} left)` : ""}` : "",
    s.measurements.length > 0
      ? `${s.measurements.filter((m) => m.verdict === "successful").length}/${s.measurements.length} measurements ok`
      : "",
  ].filter(Boolean);
}

/**
 * A release as `manent release status --watch` draws it on a terminal, redrawn at each change (and
 * each second of a soak, for the time left): its head, one line per stage, and what it waits for.
 */
export function releaseView(r: ReleaseRecord, paint: Painter = plain, now = Date.now()): string[] {
  const width = Math.max(...r.stages.map((s) => s.environments.join(", ").length));
  const lines = [
    `release ${r.id}: ${r.application} ${r.version} (${r.artifact})`,
    `  Status:   ${paint.status(r.status)}`,
    `  sha256:   ${r.sha256 ?? "(not pinned yet)"}`,
    `  Started:  ${r.created_at} by ${r.submitted_by ?? "-"}`,
    ...(r.retry_of ? [`  Retry of: release ${r.retry_of}`] : []),
    ...(r.retried_by?.length ? [`  Retried:  by release ${r.retried_by.join(", ")}`] : []),
    "",
    "STAGES",
  ];
  for (const s of r.stages) {
    const notes = stageNotes(s, now);
    lines.push(
      `  ${s.index}. ${s.environments.join(", ").padEnd(width)}  ${paint.status(s.status)}${notes.length ? `  ${notes.join("; ")}` : ""}`,
    );
    if (s.message) lines.push(`     ${s.message}`);
  }
  if (r.waiting) {
    lines.push("");
    lines.push(`${r.waiting.hint}${r.waiting.kind === "soak" && r.waiting.until ? ` (${timeLeft(r.waiting.until, now)} left)` : ""}`);
  }
  return lines;
}

/**
 * A release's progress as plain lines, each printed once when it first holds (a pipe, a CI log):
 * each stage's status and deploys as they change, and each wait.
 */
export class ReleaseTimeline {
  private readonly printed = new Set<string>();

  constructor(private readonly write: (line: string) => void) {}

  update(r: ReleaseRecord): void {
    this.once("head", `release ${r.id}: ${r.application} ${r.version} (${r.artifact})`);
    if (r.retry_of) this.once("retry_of", `retry of release ${r.retry_of}`);
    if (r.sha256) this.once("sha256", `sha256 ${r.sha256}`);
    for (const s of r.stages) {
      const where = `${s.index}. ${s.environments.join(", ")}`;
      const by = s.done_by ? ` (done by release ${s.done_by})` : "";
      if (s.status !== "pending") this.once(`${s.index}:${s.status}`, `${where}: ${s.status}${by}`);
      for (const d of s.deploys)
        this.once(`${s.index}:${d.deploy_id}:${d.status}`, `${where}: deploy ${d.deploy_id} to ${d.environment} ${d.status}`);
      if (s.promoted_by) this.once(`${s.index}:promoted`, `${where}: promoted by ${s.promoted_by}`);
      for (const a of s.approvals) this.once(`${s.index}:approved:${a.by_id}`, `${where}: approved by ${a.by}`);
      if (s.soak_until) this.once(`${s.index}:soak`, `${where}: soak until ${s.soak_until}`);
    }
    if (r.waiting) this.once(`waiting:${r.waiting.stage}:${r.waiting.kind}:${r.waiting.hint}`, r.waiting.hint);
  }

  finish(r: ReleaseRecord): void {
    this.update(r);
    this.write(r.error && r.status !== "succeeded" ? `${r.status}: ${r.error.message}` : r.status);
  }

  private once(key: string, line: string): void {
    if (this.printed.has(key)) return;
    this.printed.add(key);
    this.write(line);
  }
}
