/**
 * The overview: every application's artifact by environment, each cell saying what runs there
 * (the last release that succeeded), how the last deploy ended, and what is in progress. It answers
 * "which version runs where, and since when, and by whom" from the deploy records alone.
 */
import type { DeployKind, DeployStatus } from "../engine/deploy-store.js";
import type { ScopePattern } from "../identity/index.js";
import type { RolloutState } from "../rollout/rollout-state.js";

/** One deploy as a cell shows it. */
export interface OverviewDeploy {
  id: string;
  kind: Exclude<DeployKind, "dry_run">;
  version: string;
  status: DeployStatus;
  /** Who submitted it: a person's e-mail (or subject), a token's name. */
  by: string | null;
  created_at: string;
  finished_at: string | null;
}

/** A deploy in progress, with where its rollout stands. */
export interface OverviewProgress extends OverviewDeploy {
  /** "canary step 2/4 at 25 %", "wave 2 of 3", or null (a plain deploy). */
  rollout: string | null;
  /** What it waits for and how to go on ("waiting for approval: manent approve …"), or null. */
  waiting: string | null;
}

/**
 * Whether the environment's targets still run what was deployed, from the last drift check
 * (`manent diff`, or the envconfig's `drift.interval`): drifted when any target is, else error when a
 * check failed on one, else unknown when the plugin cannot tell for one, else in_sync.
 */
export interface OverviewDrift {
  state: "in_sync" | "drifted" | "unknown" | "error";
  /** Targets found drifted, and targets checked. */
  drifted: number;
  targets: number;
  checked_at: string;
}

/** One application's artifact in one environment. */
export interface OverviewCell {
  environment: string;
  /** The release running there: the last deploy or rollback that succeeded; null if none has. */
  live: OverviewDeploy | null;
  /** The last deploy or rollback submitted, whatever its status. */
  last: OverviewDeploy;
  /** The newest deploy queued or running, if any. */
  in_progress: OverviewProgress | null;
  /** The last drift check's verdict; null when none has run. */
  drift: OverviewDrift | null;
}

export interface OverviewRow {
  tenant: string;
  application: string;
  artifact: string;
  /** Only the environments it has been deployed to, in the overview's environment order. */
  cells: OverviewCell[];
}

export interface Overview {
  /** Every environment of the rows, ordered by when each was first deployed to (dev before prod, as releases go). */
  environments: string[];
  rows: OverviewRow[];
}

/** One cell as the store reads it. */
export interface OverviewEntry {
  tenant: string;
  application: string;
  artifact: string;
  environment: string;
  /** When this environment first got a deploy of the artifact: orders the columns. */
  first_at: string;
  live: OverviewDeploy | null;
  last: OverviewDeploy;
  in_progress: (OverviewDeploy & { rollout: RolloutState | null }) | null;
  drift: OverviewDrift | null;
}

export interface OverviewFilter {
  /** Only what the caller may read; absent: everything. */
  scopes?: readonly ScopePattern[];
  tenant?: string;
  application?: string;
}

/** Where the overview reads deploy records (the Postgres deploy store). */
export interface OverviewSource {
  overviewEntries(filter: OverviewFilter): Promise<OverviewEntry[]>;
}

export async function readOverview(source: OverviewSource, filter: OverviewFilter): Promise<Overview> {
  return buildOverview(await source.overviewEntries(filter));
}

export function buildOverview(entries: readonly OverviewEntry[]): Overview {
  const firstAt = new Map<string, string>();
  for (const e of entries) {
    const seen = firstAt.get(e.environment);
    if (seen === undefined || e.first_at < seen) firstAt.set(e.environment, e.first_at);
  }
  const environments = [...firstAt.keys()].sort((a, b) => firstAt.get(a)!.localeCompare(firstAt.get(b)!) || a.localeCompare(b));
  const column = new Map(environments.map((env, i) => [env, i]));
  const rows = new Map<string, OverviewRow>();
  for (const e of entries) {
    // JSON of the parts: no separator a name could contain makes two rows one.
    const key = JSON.stringify([e.tenant, e.application, e.artifact]);
    let row = rows.get(key);
    if (!row) rows.set(key, (row = { tenant: e.tenant, application: e.application, artifact: e.artifact, cells: [] }));
    row.cells.push({
      environment: e.environment,
      live: e.live,
      last: e.last,
      in_progress: e.in_progress && progressOf(e.in_progress),
      drift: e.drift,
    });
  }
  const ordered = [...rows.values()].sort(
    (a, b) => a.tenant.localeCompare(b.tenant) || a.application.localeCompare(b.application) || a.artifact.localeCompare(b.artifact),
  );
  for (const row of ordered) row.cells.sort((a, b) => column.get(a.environment)! - column.get(b.environment)!);
  return { environments, rows: ordered };
}

function progressOf(d: OverviewDeploy & { rollout: RolloutState | null }): OverviewProgress {
  const { rollout, ...deploy } = d;
  return { ...deploy, rollout: rollout && describeRollout(rollout), waiting: rollout?.waiting?.hint ?? null };
}

/** A rollout's position in a few words. */
export function describeRollout(r: RolloutState): string | null {
  const parts: string[] = [];
  if (r.waves.length > 1 && r.current_wave !== null) parts.push(`wave ${r.current_wave} of ${r.waves.length}`);
  const c = r.canary;
  if (c) {
    if (c.phase === "stepping" && c.step > 0 && c.step <= c.steps.length)
      parts.push(`canary step ${c.step}/${c.steps.length} at ${c.weight} %`);
    else parts.push(`canary ${c.phase.replace(/_/g, " ")}${c.weight > 0 ? ` at ${c.weight} %` : ""}`);
  }
  return parts.length ? parts.join(", ") : null;
}
