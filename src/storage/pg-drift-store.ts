import type pg from "pg";
import type { DriftChange } from "../core/contract/index.js";
import type { EnvconfigOrigin } from "../core/config/index.js";
import type { DeployKey } from "../core/engine/deploy-store.js";
import type { DriftFilter, DriftStore, RecordedRelease, TargetDriftRecord } from "../core/drift/drift-record.js";
import { scopeCondition } from "./scope-sql.js";

export const driftStatements = [
  // One row per target identity of an application's environment: its last check.
  `create table if not exists manent.drift_targets (
     tenant text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     target text not null,
     state text not null,
     deploy_id text not null,
     plugin text not null,
     expected_version text not null,
     live_version text not null,
     changes jsonb not null default '[]'::jsonb,
     reason text,
     checked_at timestamptz not null default now(),
     changed_at timestamptz not null default now(),
     primary key (tenant, application, artifact, environment, target)
   )`,
  // The differences a check did not count (drift.ignore), each with why.
  `alter table manent.drift_targets add column if not exists ignored jsonb not null default '[]'::jsonb`,
  // When the periodic check of a key is next due: claimed by one server per interval (claimCheck).
  `create table if not exists manent.drift_schedule (
     tenant text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     next_at timestamptz not null,
     primary key (tenant, application, artifact, environment)
   )`,
];

/** The event a check that changed something appends (not a trigger's: the check writes it with its rows). */
export const driftEvent = { type: "drift.changed", data: ["tenant", "application", "artifact", "environment", "targets"] } as const;

const columns = `tenant, application, artifact, environment, target, state, deploy_id, plugin, expected_version, live_version, changes, ignored, reason,
  to_char(checked_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as checked_at,
  to_char(changed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as changed_at`;

/** Drift records and the periodic checks' schedule, in the deploys' Postgres. */
export class PgDriftStore implements DriftStore {
  constructor(private readonly pool: pg.Pool) {}

  async saveCheck(report: {
    tenant: string;
    application: string;
    artifact: string;
    environment: string;
    deploy_id: string;
    targets: TargetDriftRecord[];
  }): Promise<TargetDriftRecord[]> {
    const key = [report.tenant, report.application, report.artifact, report.environment];
    const client = await this.pool.connect();
    try {
      await client.query("begin");
      const before = await client.query<{ target: string; state: string; changes: DriftChange[] }>(
        `select target, state, changes from manent.drift_targets
         where tenant = $1 and application = $2 and artifact = $3 and environment = $4 for update`,
        key,
      );
      const old = new Map(before.rows.map((r) => [r.target, r]));
      const changed: TargetDriftRecord[] = [];
      for (const t of report.targets) {
        const prev = old.get(t.target);
        const differs = !prev || prev.state !== t.state || JSON.stringify(prev.changes) !== JSON.stringify(t.changes);
        const row = await client.query<TargetDriftRecord>(
          `insert into manent.drift_targets (tenant, application, artifact, environment, target, state, deploy_id, plugin,
             expected_version, live_version, changes, ignored, reason, checked_at, changed_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $14::jsonb, $12, now(), now())
           on conflict (tenant, application, artifact, environment, target) do update set
             state = excluded.state, deploy_id = excluded.deploy_id, plugin = excluded.plugin,
             expected_version = excluded.expected_version, live_version = excluded.live_version, changes = excluded.changes,
             ignored = excluded.ignored,
             reason = excluded.reason, checked_at = now(),
             changed_at = case when $13 then now() else manent.drift_targets.changed_at end
           returning ${columns}`,
          [
            ...key,
            t.target,
            t.state,
            t.deploy_id,
            t.plugin,
            t.expected_version,
            t.live_version,
            JSON.stringify(t.changes),
            t.reason,
            differs,
            JSON.stringify(t.ignored),
          ],
        );
        if (differs) changed.push(row.rows[0]!);
      }
      // Targets the environment no longer has are no longer drift.
      await client.query(
        `delete from manent.drift_targets where tenant = $1 and application = $2 and artifact = $3 and environment = $4
           and not (target = any($5::text[]))`,
        [...key, report.targets.map((t) => t.target)],
      );
      if (changed.length > 0) {
        // On the event stream (the overview, `manent status`, tests awaiting a drift), under the recorded deploy.
        await client.query(`select manent.append_event($1, $2, $3, $4::jsonb)`, [
          report.tenant,
          report.deploy_id,
          driftEvent.type,
          JSON.stringify({
            tenant: report.tenant,
            application: report.application,
            artifact: report.artifact,
            environment: report.environment,
            targets: changed,
          }),
        ]);
      }
      await client.query("commit");
      return changed;
    } catch (err) {
      await client.query("rollback").catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async list(filter: DriftFilter): Promise<TargetDriftRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    for (const k of ["tenant", "application", "artifact", "environment"] as const) {
      if (filter[k] !== undefined) where.push(`${k} = $${args.push(filter[k])}`);
    }
    const visible = filter.scopes && scopeCondition(filter.scopes, args);
    if (visible) where.push(visible);
    const rows = await this.pool.query<TargetDriftRecord>(
      `select ${columns} from manent.drift_targets ${where.length ? `where ${where.join(" and ")}` : ""}
       order by tenant, application, environment, artifact, target limit 5000`,
      args,
    );
    return rows.rows;
  }

  recordedReleases(): Promise<RecordedRelease[]> {
    return this.releases();
  }

  recordedReleasesOf(deployIds: readonly string[]): Promise<RecordedRelease[]> {
    return deployIds.length === 0 ? Promise.resolve([]) : this.releases({ deployIds });
  }

  async recordedRelease(key: DeployKey): Promise<RecordedRelease | undefined> {
    return (await this.releases({ key }))[0];
  }

  private async releases(only: { key?: DeployKey; deployIds?: readonly string[] } = {}): Promise<RecordedRelease[]> {
    const args: unknown[] = [];
    const { key, deployIds } = only;
    const sameKey = (d: string, k: string) =>
      `${d}.tenant = ${k}.tenant and ${d}.application = ${k}.application and ${d}.artifact = ${k}.artifact and ${d}.environment = ${k}.environment`;
    // Which keys: those of given deploys, one key, or every key with a deploy. Every key is found by
    // a skip scan of the deploys_key index (one probe per key, recursive): a look at every key runs
    // every few seconds on every server, and a `distinct on` over the deploys read all of them, a
    // cost that grew with the deploys kept (104-126 ms a look at 100 keys of 60-90 deploys each).
    const keys = deployIds
      ? `select distinct tenant, application, artifact, environment from manent.deploys where id = any($${args.push(deployIds)}::text[])`
      : key
        ? `select $${args.push(key.tenant)}::text as tenant, $${args.push(key.application)}::text as application,
             $${args.push(key.artifact)}::text as artifact, $${args.push(key.environment)}::text as environment`
        : `(select tenant, application, artifact, environment from manent.deploys
            order by tenant, application, artifact, environment limit 1)
           union all
           select n.tenant, n.application, n.artifact, n.environment from keys k
           cross join lateral (select d.tenant, d.application, d.artifact, d.environment from manent.deploys d
             where (d.tenant, d.application, d.artifact, d.environment) > (k.tenant, k.application, k.artifact, k.environment)
             order by d.tenant, d.application, d.artifact, d.environment limit 1) n`;
    // Each key's latest deploy (deploys_key) and last good one (deploys_key_good): one probe each.
    const perKey = `keys as (${keys}), latest as (
           select k.tenant, k.application, k.artifact, k.environment, l.id, l.status, l.envconfig from keys k
           cross join lateral (select d.id, d.status, d.envconfig from manent.deploys d
             where ${sameKey("d", "k")} and d.kind <> 'dry_run' order by d.created_at desc limit 1) l
         ), good as (
           select k.tenant, k.application, k.artifact, k.environment, g.id, g.kind, g.version, g.request, g.envconfig from keys k
           cross join lateral (select d.id, d.kind, d.version, d.request, d.envconfig from manent.deploys d
             where ${sameKey("d", "k")} and d.kind in ('deploy', 'rollback') and d.status = 'succeeded'
             order by d.finished_at desc limit 1) g
         )`;
    const rows = await this.pool.query(
      `with recursive ${perKey}
       select g.tenant, g.application, g.artifact, g.environment, g.id as deploy_id, g.kind, g.version, g.request, g.envconfig,
         l.id as latest_id, l.status as latest_status, l.envconfig as latest_envconfig,
         -- A good deploy of kind deploy is its key's last succeeded deploy, so its own fetch step is
         -- the one wanted (one row by key); only a rollback's looks through the key's deploys.
         coalesce(
           (select s.output from manent.deploy_steps s
             where g.kind = 'deploy' and s.deploy_id = g.id and s.name = 'fetch' and s.status = 'succeeded'),
           (select s.output from manent.deploy_steps s join manent.deploys d on d.id = s.deploy_id
             where ${sameKey("d", "g")}
               and d.kind = 'deploy' and d.version = g.version and d.status = 'succeeded' and s.name = 'fetch' and s.status = 'succeeded'
             order by d.finished_at desc limit 1)) as fetched
       from good g join latest l using (tenant, application, artifact, environment)
       order by g.tenant, g.application, g.artifact, g.environment`,
      args,
    );
    return rows.rows.map((r: Record<string, unknown>) => {
      const out: RecordedRelease = {
        tenant: r.tenant as string,
        application: r.application as string,
        artifact: r.artifact as string,
        environment: r.environment as string,
        deploy_id: r.deploy_id as string,
        kind: r.kind as "deploy" | "rollback",
        version: r.version as string,
        request: r.request as Record<string, unknown>,
        latest: {
          id: r.latest_id as string,
          status: r.latest_status as string,
          ...(r.latest_envconfig != null && { envconfig: r.latest_envconfig as EnvconfigOrigin }),
        },
        ...(r.envconfig != null && { envconfig: r.envconfig as EnvconfigOrigin }),
      };
      const fetched = fetchedArtifact(r.fetched);
      if (fetched) out.fetched = fetched;
      return out;
    });
  }

  async claimCheck(key: DeployKey, intervalMs: number): Promise<boolean> {
    // One statement: the row is locked by the first server, and the others see the due time it set.
    // A due time further than one interval away (the interval was shortened) is due now.
    const r = await this.pool.query(
      `insert into manent.drift_schedule (tenant, application, artifact, environment, next_at)
       values ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
       on conflict (tenant, application, artifact, environment) do update set next_at = excluded.next_at
       where manent.drift_schedule.next_at <= now() or manent.drift_schedule.next_at > excluded.next_at
       returning 1`,
      [key.tenant, key.application, key.artifact, key.environment, intervalMs],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async driftedCounts(): Promise<{ tenant: string; application: string; environment: string; drifted: number }[]> {
    const rows = await this.pool.query<{ tenant: string; application: string; environment: string; drifted: string }>(
      `select tenant, application, environment, count(*) filter (where state = 'drifted') as drifted
       from manent.drift_targets group by tenant, application, environment`,
    );
    return rows.rows.map((r) => ({ ...r, drifted: Number(r.drifted) }));
  }
}

/** The fetch step's output (`{result: "<artifact JSON>"}`): where the release's bytes came from. */
function fetchedArtifact(output: unknown): { source: string; sha256?: string } | undefined {
  const text = (output as { result?: unknown } | null)?.result;
  if (typeof text !== "string") return undefined;
  try {
    const a = JSON.parse(text) as { source?: unknown; sha256?: unknown };
    if (typeof a.source !== "string") return undefined;
    return typeof a.sha256 === "string" ? { source: a.source, sha256: a.sha256 } : { source: a.source };
  } catch {
    return undefined;
  }
}
