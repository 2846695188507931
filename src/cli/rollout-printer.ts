import type { DeployRecord } from "../core/engine/deploy-store.js";

/**
 * The lines that show a deploy's rollout: each wave (targets done of total), the canary (step,
 * weight, phase, testers), analysis measurements, the approvals counted (who, when), what it waits
 * for (who is still awaited) and how to go on, and the operator commands. Each line has a key; a printer prints a key once, so a followed deploy reads
 * as a timeline.
 */
export function rolloutLines(d: Pick<DeployRecord, "rollout" | "id" | "targets">): { key: string; line: string }[] {
  const r = d.rollout;
  if (!r) return [];
  const lines: { key: string; line: string }[] = [];
  const done = new Set(
    d.targets.filter((t) => t.phase === "deploy" && (t.status === "deployed" || t.status === "unchanged")).map((t) => t.host),
  );
  for (const w of r.waves) {
    if (w.status === "pending") continue;
    const n = w.hosts.filter((h) => done.has(h)).length;
    const counted = w.status === "running" ? `${n} of ${w.hosts.length} targets` : `${w.hosts.length} targets`;
    const line = `  wave ${w.index}/${r.waves.length} ${w.name}: ${w.status} (${counted})`;
    lines.push({ key: `wave:${w.index}:${w.status}${w.status === "running" ? `:${n}` : ""}`, line });
  }
  const c = r.canary;
  if (c) {
    const where = c.wave !== null ? ` (wave ${c.wave})` : "";
    if (c.testers)
      lines.push({ key: `testers:${c.wave}`, line: `  canary${where}: testers reach the candidate with ${format(c.testers)}` });
    const step = c.step >= 1 && c.step <= c.steps.length ? `step ${c.step}/${c.steps.length} (${c.steps[c.step - 1]}), ` : "";
    lines.push({
      key: `canary:${c.wave}:${c.step}:${c.phase}:${c.weight}`,
      line: `  canary${where}: ${step}weight ${c.weight}%, ${c.phase.replace("_", " ")}`,
    });
  }
  const b = r.background;
  if (b) {
    const from = b.starting_step === null ? "across the waves" : `from canary step ${b.starting_step}`;
    const since = b.since ? ` since ${b.since}` : "";
    const why = b.status === "failed" && b.message ? `: ${b.message}` : "";
    lines.push({
      key: `background:${b.status}:${b.since}`,
      line: `  background analysis ${b.checks.map((c) => c.check).join(", ")} (${from}): ${b.status}${since}${why}`,
    });
  }
  for (const m of r.measurements) {
    const what = m.step === "background" ? "background analysis" : "analysis";
    lines.push({
      key: `measurement:${m.step}:${m.check}:${m.at}`,
      line: `    ${what} ${m.check}: ${m.value ?? "no value"} → ${m.verdict}${m.message ? ` (${m.message})` : ""}`,
    });
  }
  for (const a of r.approvals ?? []) {
    lines.push({
      key: `approval:${a.step}:${a.by_id}`,
      line: `  ✓ approved by ${a.by} at ${a.at} (${a.step}${a.command === "promote" ? ", by promote" : ""})`,
    });
  }
  // The hint says who is still awaited; it changes with each approval.
  if (r.waiting) lines.push({ key: `waiting:${r.waiting.step}:${r.waiting.hint}`, line: `  ⏸ ${r.waiting.hint}` });
  for (const cmd of r.commands) {
    lines.push({
      key: `command:${cmd.at}:${cmd.command}`,
      line: `  ${cmd.command}${cmd.full ? " --full" : ""} by ${cmd.by ?? "(unknown)"} at ${cmd.at}${cmd.during ? ` during ${cmd.during}` : ""}`,
    });
  }
  return lines;
}

function format(details: Record<string, string>): string {
  return Object.entries(details)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}
