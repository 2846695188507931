import type { DeployView } from "../core/engine/deploy-events.js";
import { verifiedLine } from "./progress-printer.js";
import { envconfigOrigin } from "./envconfig-origin.js";
import type { Painter } from "./output/colour.js";

/** A cell of a table: its text, and whether it is a status word to paint. */
interface Cell {
  text: string;
  status?: boolean;
}

const marks: Record<string, string> = { running: "…", succeeded: "✓", failed: "✗", skipped: "-" };

/**
 * One deploy as a whole view (as `kubectl argo rollouts get rollout` shows a rollout): its status,
 * steps, waves, canary (step, weight, analysis), what it waits for, and its targets. The live view
 * redraws it at each event; a plain `manent status` on a terminal prints it once.
 */
export function deployView(d: DeployView, paint: Painter): string[] {
  const lines: string[] = [];
  const what = d.kind === "rollback" ? "rollback" : d.kind === "dry_run" ? "dry-run" : "deploy";
  lines.push(`${paint.paint("bold", `${what} of ${d.application} ${d.version}`)} → ${d.environment}  [${d.id}]`);
  const field = (name: string, value: string) => lines.push(`  ${`${name}:`.padEnd(12)}${value}`);
  if (d.tenant !== "untenanted") field("Tenant", d.tenant);
  field("Status", paint.status(d.status) + (d.error ? ` — ${d.error.message}` : ""));
  if (d.submitted_by) field("Submitted", `by ${d.submitted_by} at ${d.created_at}`);
  if (d.retry_of) field("Retry of", d.retry_of);
  if (d.envconfig) field("Envconfig", envconfigOrigin(d.envconfig));
  for (const v of d.verification ?? []) field("Verified", verifiedLine(v).replace(/^verified /, ""));
  if (d.retried_by?.length) field("Retried by", d.retried_by.join(", "));
  if (d.waiting) field("Waiting", d.waiting.hint);
  const r = d.rollout;
  if (r?.waiting) field("Waiting", r.waiting.hint + (r.waiting.until ? ` (until ${r.waiting.until})` : ""));
  if (r?.message) field("Message", r.message);

  lines.push("", "STEPS");
  if (d.steps.length === 0) lines.push("  (none yet)");
  lines.push(
    ...table(
      d.steps.map((s) => [
        { text: marks[s.status] ?? "?", status: true },
        { text: s.name },
        { text: s.status, status: true },
        { text: s.duration_ms != null ? `${s.duration_ms}ms` : "" },
        { text: s.attempts > 1 ? `${s.attempts} attempts` : "" },
        { text: s.error ? s.error.message : "" },
      ]),
      paint,
    ),
  );

  if (r && r.waves.length > 1) {
    const done = new Set(
      d.targets.filter((t) => t.phase === "deploy" && (t.status === "deployed" || t.status === "unchanged")).map((t) => t.host),
    );
    lines.push("", "WAVES");
    lines.push(
      ...table(
        r.waves.map((w) => [
          { text: `${w.index}/${r.waves.length}` },
          { text: w.name },
          { text: w.status, status: true },
          { text: `${w.hosts.filter((h) => done.has(h)).length} of ${w.hosts.length} targets` },
        ]),
        paint,
      ),
    );
  }
  const c = r?.canary;
  if (c) {
    lines.push("", `CANARY${c.wave !== null ? ` (wave ${c.wave})` : ""}`);
    const step = c.step >= 1 && c.step <= c.steps.length ? `step ${c.step}/${c.steps.length} (${c.steps[c.step - 1]})` : "";
    lines.push(`  ${[step, `weight ${c.weight}%`, paint.status(c.phase)].filter(Boolean).join(", ")}`);
    lines.push(`  ${weightBar(c.weight)}`);
    if (c.testers)
      lines.push(
        `  testers reach the candidate with ${Object.entries(c.testers)
          .map(([k, v]) => `${k}=${v}`)
          .join(" ")}`,
      );
    lines.push(
      ...table(
        c.steps.map((s, i) => [{ text: i + 1 < c.step ? "✓" : i + 1 === c.step ? "▶" : " ", status: true }, { text: `${i + 1}. ${s}` }]),
        paint,
      ),
    );
  }
  if (r && r.measurements.length > 0) {
    lines.push("", "ANALYSIS");
    lines.push(
      ...table(
        r.measurements.map((m) => [
          { text: m.check },
          { text: String(m.value ?? "no value") },
          { text: m.verdict === "successful" ? "succeeded" : m.verdict === "failed" ? "failed" : m.verdict, status: true },
          { text: m.message },
        ]),
        paint,
      ),
    );
  }
  for (const a of r?.approvals ?? []) lines.push(`  ${paint.status("✓")} approved by ${a.by} at ${a.at} (${a.step})`);

  if (d.targets.length > 0) {
    lines.push("", "TARGETS");
    lines.push(
      ...table(
        [
          ["HOST", "PHASE", "STATUS", "DURATION", "ERROR"].map((text) => ({ text })),
          ...d.targets.map((t) => [
            { text: t.host },
            { text: t.phase },
            { text: t.status, status: true },
            { text: t.duration_ms != null ? `${t.duration_ms}ms` : "" },
            { text: t.error ?? "" },
          ]),
        ],
        paint,
      ),
    );
  }
  return lines;
}

/** The candidate's share of traffic drawn as a bar of 20 cells. */
function weightBar(weight: number): string {
  const filled = Math.round(Math.max(0, Math.min(100, weight)) / 5);
  return `candidate [${"█".repeat(filled)}${"·".repeat(20 - filled)}] stable`;
}

/** Rows with aligned columns; a status cell is painted after padding, so colour never shifts a column. */
function table(rows: Cell[][], paint: Painter): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, [...c.text].length)));
  return rows.map(
    (row) =>
      "  " +
      row
        .map((c, i) => {
          const pad = " ".repeat((widths[i] ?? 0) - [...c.text].length);
          return (c.status ? paint.status(c.text) : c.text) + (i < row.length - 1 ? pad : "");
        })
        .join("  ")
        .trimEnd(),
  );
}
