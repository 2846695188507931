import type { Command, Option } from "commander";
import type { Overview, OverviewCell } from "../core/environments/overview.js";
import type { ApiClient } from "./api-client.js";
import { printedAsDocument, type Output } from "./output/output-format.js";

const out = (line: string): void => void process.stdout.write(`${line}\n`);

/** `manent overview`: applications by environment, each cell the version live there and what moves. */
export function overviewCommand(program: Command, client: () => Promise<ApiClient>, output: () => Option): void {
  program
    .command("overview")
    .description(
      "what runs where: each application's artifact by environment, with the version live there, when and by whom, " +
        "the last deploy if it did not succeed, a rollout in progress, and the releases waiting to come in",
    )
    .option("--tenant <tenant>", "only this tenant (you see only what you may read)")
    .option("--application <application>", "only this application")
    .addOption(output())
    .action(async (o: { tenant?: string; application?: string; output?: Output }) => {
      const overview = await (await client()).overview({ tenant: o.tenant, application: o.application });
      if (await printedAsDocument(overview, o.output)) return;
      for (const line of overviewLines(overview)) out(line);
    });
}

/**
 * One block per application's artifact, one line per environment in the overview's order:
 *   team-a/hello (hello)
 *     dev      1.4.0  2026-12-02 10:14 by alice@example.com
 *     prod     1.3.0  2026-12-01 16:02 by bob@example.com; 1.4.0 running: canary step 2/4 at 25 %
 *     prod     1.3.0  2026-12-01 16:02 by bob@example.com; 1.5.0 waiting for promotion since 2026-12-02 11:00: manent release promote …
 */
export function overviewLines(o: Overview): string[] {
  if (o.rows.length === 0) return ["nothing deployed yet (or nothing you may read)"];
  const width = Math.max(...o.environments.map((e) => e.length));
  const lines: string[] = [];
  for (const row of o.rows) {
    lines.push(`${row.tenant}/${row.application}${row.artifact === row.application ? "" : ` (${row.artifact})`}`);
    for (const cell of row.cells) lines.push(`  ${cell.environment.padEnd(width)}  ${cellText(cell)}`);
  }
  return lines;
}

function cellText(c: OverviewCell): string {
  const parts: string[] = [];
  parts.push(c.live ? `${c.live.version}  ${when(c.live.finished_at)}${c.live.by ? ` by ${c.live.by}` : ""}` : "nothing live");
  if (c.live && c.live.kind === "rollback") parts[0] += " (a rollback)";
  const p = c.in_progress;
  if (p) parts.push(`${p.version} ${p.status}${p.rollout ? `: ${p.rollout}` : ""}${p.waiting ? `; ${p.waiting}` : ""} (${p.id})`);
  else if (c.last && c.last.status !== "succeeded")
    parts.push(`last deploy ${c.last.version} ${c.last.status.replace("_", " ")} (${c.last.id})`);
  if (c.drift) parts.push(driftText(c.drift));
  // A server from before it sends none; `current` and `unknown` are not news, nor behind while a deploy is in progress.
  if (c.envconfig?.state === "behind" && !p) {
    const head = c.envconfig.head?.commit;
    parts.push(`envconfig behind ${head ? `the ref's head ${head.slice(0, 12)}` : "the file"}: manent diff shows the change`);
  }
  for (const w of c.pending) parts.push(pendingText(w));
  return parts.join("; ");
}

/** "1.5.0 waiting for approval since 2026-12-02 11:00: manent release approve ID (…)"; a soak says where and until when. */
export function pendingText(w: OverviewCell["pending"][number]): string {
  if (w.waiting_for === "soak" || w.waiting_for === "analysis") {
    const where = w.from.join(", ");
    const until = w.until ? ` until ${when(w.until)}` : "";
    return `${w.version} next: ${w.waiting_for === "soak" ? `soaking in ${where}${until}` : `analysis in ${where}`} (release ${w.release_id})`;
  }
  const how = w.hint.replace(/^waiting for (promotion|approval): /, "");
  return `${w.version} waiting for ${w.waiting_for} since ${when(w.since)}: ${how}`;
}

function driftText(d: NonNullable<OverviewCell["drift"]>): string {
  if (d.state === "drifted") return `drifted: ${d.drifted} of ${d.targets} targets`;
  if (d.state === "in_sync") return "in sync";
  return d.state === "error" ? "drift check failed" : "drift unknown";
}

/** "2026-12-02 10:14" (UTC), or "-". */
function when(iso: string | null): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 16)}` : "-";
}
