import type { ArtifactVerification } from "../core/verification/verification-result.js";
import type { DeployView } from "../core/engine/deploy-events.js";
import type { StepRecord } from "../core/engine/deploy-store.js";
import { plain, type Painter } from "./output/colour.js";
import { rolloutLines } from "./rollout-printer.js";

const marks: Record<string, string> = { running: "…", succeeded: "✓", failed: "✗", skipped: "-" };

/**
 * Prints a deploy's progress as it changes: one line per step state and per target result,
 * each printed once, so a terminal or a CI log reads as a timeline.
 */
export class ProgressPrinter {
  private readonly printed = new Set<string>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly paint: Painter = plain,
  ) {}

  update(d: DeployView): void {
    this.once(`head`, `${label(d)}`);
    // Each wait for a deploy window once (a new round after a restart with other windows prints its own line).
    if (d.waiting) this.once(`waiting:${d.waiting.since}:${d.waiting.until ?? ""}`, `  … ${d.waiting.hint}`);
    for (const step of d.steps) {
      if (step.status === "running")
        this.once(`${step.name}:running:${step.attempts}`, `  … ${step.name}${step.attempts > 1 ? ` (attempt ${step.attempts})` : ""}`);
      // A step's targets are listed when it ends, in host order: the same lines whatever order the
      // targets finished in (they may finish at once), so a CI log of the same deploy reads the same.
      if (step.status === "running") continue;
      for (const t of d.targets.filter((t) => phasesOf(step.name).includes(t.phase))) {
        this.once(
          `${t.phase}:${t.host}:${t.status}`,
          `      ${t.host}: ${this.paint.status(t.status)}${t.duration_ms != null ? ` ${t.duration_ms}ms` : ""}${t.error ? ` — ${t.error}` : ""}`,
        );
      }
      this.once(`${step.name}:${step.status}:${step.attempts}`, stepLine(step, this.paint));
    }
    for (const { key, line } of rolloutLines(d)) this.once(`rollout:${key}`, line);
  }

  finish(d: DeployView): void {
    this.update(d);
    for (const v of d.verification ?? []) this.write(verifiedLine(v));
    if (d.retried_by?.length) this.write(`retried by ${d.retried_by.join(", ")}`);
    this.write(d.error ? `${this.paint.status(d.status)}: ${d.error.message}` : this.paint.status(d.status));
  }

  private once(key: string, line: string): void {
    if (this.printed.has(key)) return;
    this.printed.add(key);
    this.write(line);
  }
}

/** One verification of the artifact, as `manent status` and `manent deploy` print it. */
export function verifiedLine(v: ArtifactVerification): string {
  const who = v.identity ? `${v.identity} ${v.issuer ? `(issuer ${v.issuer}) ` : ""}` : "";
  // An image's digest is in its reference.
  return `verified ${v.image ?? v.digest}: ${v.method} ${who}${v.key} (policy ${v.policy})`;
}

function label(d: DeployView): string {
  const what =
    d.kind === "rollback"
      ? `rollback of ${d.application} to ${d.version}`
      : `${d.kind === "dry_run" ? "dry-run" : "deploy"} of ${d.application} ${d.version}`;
  return `${what} → ${d.environment}${d.tenant !== "untenanted" ? ` (tenant ${d.tenant})` : ""}  [${d.id}]${d.retry_of ? ` retry of ${d.retry_of}` : ""}`;
}

function stepLine(s: StepRecord, paint: Painter): string {
  const attempts = s.attempts > 1 ? `, ${s.attempts} attempts` : "";
  const took = s.duration_ms != null ? ` (${s.duration_ms}ms${attempts})` : "";
  return `  ${paint.status(marks[s.status] ?? "?")} ${s.name}${took}${s.error ? ` — ${s.error.message}` : ""}`;
}

/** The plugin calls whose target results belong under a step (a dry-run reports under "deploy"; a checkpoint only reads). */
function phasesOf(step: string): string[] {
  return step === "deploy" ? ["deploy", "dry_run"] : step === "rollback" ? ["rollback"] : [];
}
