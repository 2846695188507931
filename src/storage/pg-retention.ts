import type pg from "pg";
import type { Keep } from "../core/config/retention-config.js";
import { terminalStatuses, type DeployKey } from "../core/engine/deploy-store.js";
import { terminalReleaseStatuses } from "../core/release/release-store.js";
import type { AuditRow, RetentionStore } from "../core/retention/retention-store.js";

const endedDeploys = [...terminalStatuses];
const endedReleases = [...terminalReleaseStatuses];

/** The policy's bounds as the statements take them: null for a bound left out. */
const bounds = (keep: Keep) => [keep.keep_last ?? null, keep.keep_for === undefined ? null : keep.keep_for / 1000];

/**
 * Deletes what a retention policy lets go (core/retention/retention-sweep.ts decides what), one
 * statement at a time through the pool: a sweep never holds a transaction open, and one cut by an
 * outage or a kill leaves nothing half deleted that the next sweep would not finish.
 */
export class PgRetentionStore implements RetentionStore {
  constructor(private readonly pool: pg.Pool) {}

  async migrate(): Promise<void> {
    await this.pool.query(`create table if not exists manent.leases (
       name text primary key,
       holder text not null,
       until timestamptz not null
     )`);
  }

  async takeLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const r = await this.pool.query(
      `insert into manent.leases as l (name, holder, until) values ($1, $2, now() + make_interval(secs => $3))
       on conflict (name) do update set holder = excluded.holder, until = excluded.until
         where l.until < now() or l.holder = excluded.holder
       returning holder`,
      [name, holder, ttlMs / 1000],
    );
    return r.rowCount === 1;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    await this.pool.query(`delete from manent.leases where name = $1 and holder = $2`, [name, holder]);
  }

  async deployKeys(): Promise<(DeployKey & { ended: number })[]> {
    const r = await this.pool.query<DeployKey & { ended: number }>(
      `select tenant, application, artifact, environment, count(*)::int as ended
       from manent.deploys where status = any($1::text[])
       group by tenant, application, artifact, environment`,
      [endedDeploys],
    );
    return r.rows;
  }

  /**
   * Up to `limit` ended deploys of one key that `keep` lets go, oldest first. Never the key's
   * newest deploy, the newest succeeded deploy of each of its `versionsKept` newest versions (what a
   * rollback returns to, a drift check compares with, an upload is kept for), one a drift record
   * names, the source of a retry in progress, nor a stage deploy of a release still kept.
   */
  async deployCandidates(key: DeployKey, keep: Keep, versionsKept: number, limit: number): Promise<string[]> {
    const r = await this.pool.query<{ id: string }>(
      `with k as (
         select id, kind, status, version, created_at, finished_at,
                row_number() over (order by created_at desc, id desc) as n
         from manent.deploys
         where tenant = $1 and application = $2 and artifact = $3 and environment = $4
       ),
       released as (
         select id, version, finished_at,
                row_number() over (partition by version order by finished_at desc nulls last, id desc) as per_version
         from k where status = 'succeeded' and kind in ('deploy', 'rollback')
       ),
       kept_versions as (
         select id from released where per_version = 1 order by finished_at desc nulls last limit $5
       ),
       staged as (
         select d->>'deploy_id' as id
         from manent.releases r, jsonb_array_elements(r.stages) s, jsonb_array_elements(coalesce(s->'deploys', '[]'::jsonb)) d
         where r.tenant = $1 and r.application = $2
       )
       select k.id from k
       where k.status = any($6::text[]) and k.n > 1
         and ($7::int is null or k.n > $7)
         and ($8::float8 is null or k.created_at < now() - make_interval(secs => $8))
         and k.id not in (select id from kept_versions)
         and not exists (select 1 from manent.drift_targets t where t.deploy_id = k.id)
         and not exists (select 1 from manent.deploys x where x.retry_of = k.id and x.status <> all($6::text[]))
         and not exists (select 1 from staged where staged.id = k.id)
       order by k.created_at, k.id
       limit $9`,
      [key.tenant, key.application, key.artifact, key.environment, versionsKept, endedDeploys, ...bounds(keep), limit],
    );
    return r.rows.map((row) => row.id);
  }

  async deleteDeploys(ids: string[]): Promise<void> {
    // Events first: a sweep cut in between finds the deploys again and deletes what is left.
    await this.pool.query(`delete from manent.events where deploy_id = any($1::text[])`, [ids]);
    // Steps, targets and commands go with them (on delete cascade).
    await this.pool.query(`delete from manent.deploys where id = any($1::text[]) and status = any($2::text[])`, [ids, endedDeploys]);
  }

  async releaseKeys(): Promise<{ tenant: string; application: string; ended: number }[]> {
    const r = await this.pool.query<{ tenant: string; application: string; ended: number }>(
      `select tenant, application, count(*)::int as ended from manent.releases where status = any($1::text[])
       group by tenant, application`,
      [endedReleases],
    );
    return r.rows;
  }

  /** Up to `limit` ended releases of one application that `keep` lets go, oldest first; never its newest, nor one a retry in progress came from. */
  async releaseCandidates(key: { tenant: string; application: string }, keep: Keep, limit: number): Promise<string[]> {
    const r = await this.pool.query<{ id: string }>(
      `with r as (
         select id, status, created_at, row_number() over (order by created_at desc, id desc) as n
         from manent.releases where tenant = $1 and application = $2
       )
       select r.id from r
       where r.status = any($3::text[]) and r.n > 1
         and ($4::int is null or r.n > $4)
         and ($5::float8 is null or r.created_at < now() - make_interval(secs => $5))
         and not exists (select 1 from manent.releases x where x.retry_of = r.id and x.status <> all($3::text[]))
       order by r.created_at, r.id
       limit $6`,
      [key.tenant, key.application, endedReleases, ...bounds(keep), limit],
    );
    return r.rows.map((row) => row.id);
  }

  async deleteReleases(ids: string[]): Promise<void> {
    await this.pool.query(`delete from manent.events where release_id = any($1::text[])`, [ids]);
    await this.pool.query(`delete from manent.release_retries where retry_of = any($1::text[]) or id = any($1::text[])`, [ids]);
    await this.pool.query(`delete from manent.releases where id = any($1::text[]) and status = any($2::text[])`, [ids, endedReleases]);
  }

  async auditBefore(cutoffMs: number, limit: number): Promise<AuditRow[]> {
    const r = await this.pool.query<AuditRow>(
      `select * from manent.audit where at < now() - make_interval(secs => $1) order by id limit $2`,
      [cutoffMs / 1000, limit],
    );
    return r.rows;
  }

  async deleteAudit(ids: string[]): Promise<number> {
    // One statement, so its setting lasts exactly its own transaction (audit-schema.ts lets this delete through).
    const r = await this.pool.query(
      `with exported as (select set_config('manent.audit_exported', 'on', true) as setting)
       delete from manent.audit where id = any($1::bigint[]) and (select setting from exported) = 'on'`,
      [ids],
    );
    return r.rowCount ?? 0;
  }

  async databaseBytes(): Promise<number> {
    const r = await this.pool.query<{ bytes: string }>(`select pg_database_size(current_database())::text as bytes`);
    return Number(r.rows[0]?.bytes ?? 0);
  }
}
