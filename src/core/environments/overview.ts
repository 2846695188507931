/**
 * The overview: every application's artifact by environment, each cell saying what runs there
 * (the last release that succeeded), how the last deploy ended, and what is in progress. It answers
 * "which version runs where, and since when, and by whom" from the deploy records alone.
 */
import type { EnvconfigOrigin } from "../config/index.js";
import type { DeployKey, DeployKind, DeployStatus } from "../engine/deploy-store.js";
import { matchesPattern, type ScopePattern } from "../identity/index.js";
import type { ReleaseRecord, ReleaseWaiting } from "../release/release-store.js";
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

/**
 * Whether what runs was deployed with the envconfig a deploy would read now: `behind` when the
 * tracked ref's head (or the file) holds another content, `unknown` when either side cannot be told
 * (a release recorded before manent kept its envconfig, an envconfig that does not load now).
 */
export interface OverviewEnvconfig {
  state: "current" | "behind" | "unknown";
  /** Where the running release's envconfig came from. */
  deployed: EnvconfigOrigin | null;
  /** Where a deploy now would read it: for git, the fetched head of the ref. */
  head: EnvconfigOrigin | null;
}

/** Where a deploy of a key would read its envconfig now; undefined when it cannot be read. */
export type EnvconfigHeads = (key: DeployKey) => Promise<EnvconfigOrigin | undefined>;

/**
 * A release waiting to come into this environment: at its manual promotion or approval for it, or
 * soaking or analysing in the environment before it. `action` is what a user does here to move it on
 * (promote, approve), or null when only time (a soak, an analysis) moves it.
 */
export interface OverviewPending {
  release_id: string;
  version: string;
  waiting_for: ReleaseWaiting["kind"];
  /** Where it stands now: the environments of the stage before (soaking there), or [] before its first stage. */
  from: string[];
  since: string;
  /** When the soak ends or the approval times out; null for none. */
  until: string | null;
  /** The release's own words ("waiting for promotion: manent release promote ID --to prod"). */
  hint: string;
  action: "promote" | "approve" | null;
}

/** One application's artifact in one environment. */
export interface OverviewCell {
  environment: string;
  /** The release running there: the last deploy or rollback that succeeded; null if none has. */
  live: OverviewDeploy | null;
  /** The last deploy or rollback submitted, whatever its status; null for an environment a release waits to reach first. */
  last: OverviewDeploy | null;
  /** The newest deploy queued or running, if any. */
  in_progress: OverviewProgress | null;
  /** The last drift check's verdict; null when none has run. */
  drift: OverviewDrift | null;
  /** Whether the running release has the envconfig of now; null when nothing runs (or it was not asked). */
  envconfig: OverviewEnvconfig | null;
  /** Releases waiting to come here next, oldest first. */
  pending: OverviewPending[];
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
  /** Where the running release's envconfig came from (null: nothing runs, or recorded before manent kept it). */
  live_envconfig: EnvconfigOrigin | null;
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

/** Where the overview reads the releases waiting to move on (the Postgres release store). */
export interface WaitingReleaseSource {
  waitingReleases(filter: OverviewFilter): Promise<ReleaseRecord[]>;
}

export async function readOverview(
  source: OverviewSource,
  filter: OverviewFilter,
  releases?: WaitingReleaseSource,
  heads?: EnvconfigHeads,
): Promise<Overview> {
  const [entries, waiting] = await Promise.all([source.overviewEntries(filter), releases ? releases.waitingReleases(filter) : []]);
  const overview = buildOverview(entries, pendingPromotions(waiting, filter.scopes));
  if (heads) await compareHeads(overview, entries, heads);
  return overview;
}

/** Each running release's envconfig against the one a deploy would read now (read one cell at a time: a cache answers most). */
async function compareHeads(overview: Overview, entries: readonly OverviewEntry[], heads: EnvconfigHeads): Promise<void> {
  const deployed = new Map(entries.map((e) => [JSON.stringify([e.tenant, e.application, e.artifact, e.environment]), e.live_envconfig]));
  for (const row of overview.rows) {
    for (const cell of row.cells) {
      if (!cell.live) continue;
      const key = { tenant: row.tenant, application: row.application, artifact: row.artifact, environment: cell.environment };
      const ran = deployed.get(JSON.stringify([key.tenant, key.application, key.artifact, key.environment])) ?? null;
      const head = (await heads(key)) ?? null;
      const state = !ran || !head ? "unknown" : ran.sha256 === head.sha256 ? "current" : "behind";
      cell.envconfig = { state, deployed: ran, head };
    }
  }
}

/** A release waiting to come into one environment of one application's artifact. */
export interface PendingEntry {
  tenant: string;
  application: string;
  artifact: string;
  environment: string;
  pending: OverviewPending;
}

/**
 * Where each waiting release goes next: at a manual promotion or an approval, the environments of the
 * stage it waits to enter; soaking or analysing, those of the stage after (none after the last).
 * Only environments within `scopes` (what the caller may read).
 */
export function pendingPromotions(releases: readonly ReleaseRecord[], scopes?: readonly ScopePattern[]): PendingEntry[] {
  const out: PendingEntry[] = [];
  for (const r of releases) {
    const w = r.waiting;
    if (r.status !== "running" || !w) continue;
    const entering = w.kind === "promotion" || w.kind === "approval";
    const next = entering ? w.environments : (r.stages[w.stage]?.environments ?? []);
    const from = entering ? (r.stages[w.stage - 2]?.environments ?? []) : w.environments;
    for (const environment of next) {
      if (scopes && !scopes.some((s) => inScope(s, r.tenant, r.application, environment))) continue;
      out.push({
        tenant: r.tenant,
        application: r.application,
        artifact: r.artifact,
        environment,
        pending: {
          release_id: r.id,
          version: r.version,
          waiting_for: w.kind,
          from,
          since: w.since,
          until: w.until,
          hint: w.hint,
          action: w.kind === "promotion" ? "promote" : w.kind === "approval" ? "approve" : null,
        },
      });
    }
  }
  return out;
}

function inScope(s: ScopePattern, tenant: string, application: string, environment: string): boolean {
  return matchesPattern(s.tenant, tenant) && matchesPattern(s.application, application) && matchesPattern(s.environment, environment);
}

export function buildOverview(entries: readonly OverviewEntry[], pending: readonly PendingEntry[] = []): Overview {
  const firstAt = new Map<string, string>();
  const order = (environment: string, at: string) => {
    const seen = firstAt.get(environment);
    if (seen === undefined || at < seen) firstAt.set(environment, at);
  };
  for (const e of entries) order(e.environment, e.first_at);
  // An environment no deploy reached yet comes after those that were, in the order releases wait for them.
  const lastDeployed = [...firstAt.values()].sort().at(-1) ?? "";
  for (const p of pending) if (!firstAt.has(p.environment)) order(p.environment, `${lastDeployed}~${p.pending.since}`);
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
      envconfig: null,
      pending: [],
    });
  }
  for (const p of pending) {
    const key = JSON.stringify([p.tenant, p.application, p.artifact]);
    let row = rows.get(key);
    if (!row) rows.set(key, (row = { tenant: p.tenant, application: p.application, artifact: p.artifact, cells: [] }));
    let cell = row.cells.find((c) => c.environment === p.environment);
    if (!cell) {
      cell = { environment: p.environment, live: null, last: null, in_progress: null, drift: null, envconfig: null, pending: [] };
      row.cells.push(cell);
    }
    cell.pending.push(p.pending);
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
