import type pg from "pg";
import type {
  NewRelease,
  ReleaseListFilter,
  ReleaseProgress,
  ReleaseRecord,
  ReleaseStore,
  ReleaseSubmission,
  ReleaseSummary,
} from "../core/release/release-store.js";
import type { Artifact } from "../core/contract/index.js";
import { terminalReleaseStatuses } from "../core/release/release-store.js";
import { pipelineEnvironments } from "../core/release/pipeline.js";
import { scopeCondition } from "./scope-sql.js";

/**
 * Releases (one row each, its progress rewritten by its workflow) and the events they produce:
 * `release.created`, `release.status` (a terminal status means finished) and `release.updated`
 * (stages and what it waits for), on the same event log as deploys, with `release_id` set.
 * Run after the events statements (the trigger uses manent.append_event).
 */
export const releaseStatements = [
  `create table if not exists manent.releases (
     id text primary key,
     tenant text not null,
     application text not null,
     artifact text not null,
     version text not null,
     sha256 text,
     source text not null,
     status text not null,
     pipeline jsonb not null,
     pipeline_file text not null,
     descriptor_file text not null,
     environments text[] not null,
     current_stage integer,
     stages jsonb not null default '[]'::jsonb,
     waiting jsonb,
     error jsonb,
     submitted_by text,
     submitted_by_id text,
     cancel_requested_at timestamptz,
     cancel_requested_by text,
     created_at timestamptz not null default now(),
     finished_at timestamptz
   )`,
  `create index if not exists releases_tenant_created on manent.releases (tenant, created_at desc)`,
  `alter table manent.events add column if not exists release_id text`,
  // The number of the progress's last write (see saveProgress).
  `alter table manent.releases add column if not exists progress_revision integer`,
  // A retry (`manent release retry`) names the release it retries; the artifact as submitted (its type, a sha256 given) is what the retry starts again with.
  `alter table manent.releases add column if not exists retry_of text`,
  `alter table manent.releases add column if not exists artifact_spec jsonb`,
  `create index if not exists releases_retry_of on manent.releases (retry_of) where retry_of is not null`,
  // A release has at most one retry: claimed here (the primary key decides between concurrent requests)
  // before the retry's workflow starts, since that workflow writes the release record itself.
  `create table if not exists manent.release_retries (retry_of text primary key, id text not null, created_at timestamptz not null default now())`,
  `create index if not exists events_release on manent.events (release_id, id) where release_id is not null`,
  `create or replace function manent.append_release_event(p_release manent.releases, p_type text, p_data jsonb) returns void
   language plpgsql as $$
   declare
     new_id bigint;
   begin
     new_id := manent.append_event(p_release.tenant, null, p_type, p_data);
     update manent.events set release_id = p_release.id where id = new_id;
   end $$`,
  `create or replace function manent.release_events() returns trigger language plpgsql as $$
   begin
     if tg_op = 'INSERT' then
       perform manent.append_release_event(new, 'release.created', jsonb_build_object(
         'id', new.id, 'tenant', new.tenant, 'application', new.application, 'artifact', new.artifact, 'version', new.version,
         'sha256', new.sha256, 'status', new.status, 'environments', to_jsonb(new.environments), 'submitted_by', new.submitted_by,
         'retry_of', new.retry_of, 'created_at', new.created_at));
       return new;
     end if;
     if new.status is distinct from old.status or new.error is distinct from old.error then
       perform manent.append_release_event(new, 'release.status', jsonb_build_object(
         'status', new.status, 'error', new.error, 'finished_at', new.finished_at));
     end if;
     if new.stages is distinct from old.stages or new.waiting is distinct from old.waiting
        or new.current_stage is distinct from old.current_stage or new.sha256 is distinct from old.sha256 then
       perform manent.append_release_event(new, 'release.updated', jsonb_build_object(
         'current_stage', new.current_stage, 'stages', new.stages, 'waiting', new.waiting, 'sha256', new.sha256));
     end if;
     return new;
   end $$`,
  `create or replace trigger release_events after insert or update on manent.releases for each row execute function manent.release_events()`,
];

const summaryColumns = `id, tenant, application, artifact, version, sha256, source, status, pipeline_file, environments, current_stage,
  waiting, error, submitted_by, submitted_by_id, cancel_requested_by, retry_of, created_at, finished_at`;

/** At most this many waiting releases in one overview (each is a row of a few kilobytes). */
const waitingLimit = 500;

export class PgReleaseStore implements ReleaseStore {
  constructor(private readonly pool: pg.Pool) {}

  async createRelease(r: NewRelease): Promise<void> {
    await this.pool.query(
      `insert into manent.releases (id, tenant, application, artifact, version, sha256, source, status, pipeline, pipeline_file,
         descriptor_file, environments, submitted_by, submitted_by_id, retry_of, artifact_spec)
       values ($1, $2, $3, $4, $5, $6, $7, 'running', $8, $9, $10, $11, $12, $13, $14, $15) on conflict (id) do nothing`,
      [
        r.id,
        r.tenant,
        r.application,
        r.artifact.name,
        r.artifact.version,
        r.artifact.sha256 ?? null,
        r.artifact.source,
        JSON.stringify(r.pipeline),
        r.pipeline_file,
        r.descriptor_file,
        pipelineEnvironments(r.pipeline),
        r.submitted_by,
        r.submitted_by_id,
        r.retry?.of ?? null,
        JSON.stringify(r.artifact),
      ],
    );
  }

  async claimRetry(of: string, id: string): Promise<string> {
    const claimed = await this.pool.query(
      `insert into manent.release_retries (retry_of, id) values ($1, $2) on conflict (retry_of) do nothing`,
      [of, id],
    );
    if (claimed.rowCount === 1) return id;
    // Lost to a claim committed before ours: its row is visible to this new statement.
    const held = await this.pool.query<{ id: string }>(`select id from manent.release_retries where retry_of = $1`, [of]);
    return held.rows[0]!.id;
  }

  async saveProgress(id: string, p: ReleaseProgress, revision: number): Promise<void> {
    await this.pool.query(
      `update manent.releases set status = $2, current_stage = $3, stages = $4, waiting = $5, error = $6, sha256 = coalesce($7, sha256),
         finished_at = case when $2 = any($8::text[]) then coalesce(finished_at, now()) else finished_at end, progress_revision = $9
       where id = $1 and coalesce(progress_revision, 0) <= $9`,
      [
        id,
        p.status,
        p.current_stage,
        JSON.stringify(p.stages),
        p.waiting ? JSON.stringify(p.waiting) : null,
        p.error ? JSON.stringify(p.error) : null,
        p.sha256,
        [...terminalReleaseStatuses],
        revision,
      ],
    );
  }

  async requestCancel(id: string, by: string | null): Promise<boolean> {
    const r = await this.pool.query(
      `update manent.releases set cancel_requested_at = coalesce(cancel_requested_at, now()), cancel_requested_by = coalesce(cancel_requested_by, $2)
       where id = $1 and status <> all($3::text[])`,
      [id, by, [...terminalReleaseStatuses]],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async getRelease(id: string): Promise<ReleaseRecord | undefined> {
    const r = await this.pool.query(`select ${summaryColumns}, pipeline, stages from manent.releases where id = $1`, [id]);
    if (!r.rows[0]) return undefined;
    const retries = await this.pool.query<{ id: string }>(`select id from manent.releases where retry_of = $1 order by created_at, id`, [
      id,
    ]);
    return { ...toRecord(r.rows[0] as Record<string, unknown>), retried_by: retries.rows.map((x) => x.id) };
  }

  async releaseSubmission(id: string): Promise<ReleaseSubmission | undefined> {
    const r = await this.pool.query<{ artifact_spec: Artifact | null; descriptor_file: string }>(
      `select artifact_spec, descriptor_file from manent.releases where id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row?.artifact_spec) return undefined;
    return { artifact: row.artifact_spec, descriptor_file: row.descriptor_file };
  }

  /**
   * The running releases waiting for something (a promotion, an approval, a soak, an analysis), with
   * their stages: what the overview shows in the cells of the environments they go to next.
   */
  async waitingReleases(f: Omit<ReleaseListFilter, "status" | "limit">): Promise<ReleaseRecord[]> {
    const where = [`status = 'running'`, `waiting is not null`];
    const args: unknown[] = [];
    if (f.tenant !== undefined) where.push(`tenant = $${args.push(f.tenant)}`);
    if (f.application !== undefined) where.push(`application = $${args.push(f.application)}`);
    if (f.scopes) {
      const visible = scopeCondition(f.scopes, args, { tenant: "tenant", application: "application", environment: "env" });
      if (visible) where.push(`exists (select 1 from unnest(environments) as e(env) where ${visible})`);
    }
    const r = await this.pool.query(
      `select ${summaryColumns}, pipeline, stages from manent.releases where ${where.join(" and ")}
       order by created_at, id limit ${waitingLimit}`,
      args,
    );
    return r.rows.map((row: Record<string, unknown>) => toRecord(row));
  }

  async listReleases(f: ReleaseListFilter): Promise<ReleaseSummary[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (f.tenant !== undefined) where.push(`tenant = $${args.push(f.tenant)}`);
    if (f.application !== undefined) where.push(`application = $${args.push(f.application)}`);
    if (f.status !== undefined) where.push(`status = $${args.push(f.status)}`);
    if (f.scopes) {
      // Readable when one of its environments is: the condition on one environment, for any of them.
      const visible = scopeCondition(f.scopes, args, { tenant: "tenant", application: "application", environment: "env" });
      if (visible) where.push(`exists (select 1 from unnest(environments) as e(env) where ${visible})`);
    }
    const r = await this.pool.query(
      `select ${summaryColumns} from manent.releases ${where.length ? `where ${where.join(" and ")}` : ""}
       order by created_at desc, id limit $${args.push(f.limit ?? 50)}`,
      args,
    );
    return r.rows.map((row: Record<string, unknown>) => {
      const { pipeline: _p, stages: _s, retried_by: _r, ...summary } = toRecord({ ...row, pipeline: null, stages: [] });
      return summary;
    });
  }
}

function toRecord(r: Record<string, unknown>): ReleaseRecord {
  const time = (v: unknown) => (v instanceof Date ? v.toISOString() : v === null || v === undefined ? null : String(v));
  return {
    id: r.id as string,
    tenant: r.tenant as string,
    application: r.application as string,
    artifact: r.artifact as string,
    version: r.version as string,
    sha256: (r.sha256 as string | null) ?? null,
    source: r.source as string,
    status: r.status as ReleaseRecord["status"],
    pipeline: r.pipeline as ReleaseRecord["pipeline"],
    pipeline_file: r.pipeline_file as string,
    environments: r.environments as string[],
    current_stage: (r.current_stage as number | null) ?? null,
    stages: (r.stages as ReleaseRecord["stages"]) ?? [],
    waiting: (r.waiting as ReleaseRecord["waiting"]) ?? null,
    error: (r.error as ReleaseRecord["error"]) ?? null,
    submitted_by: (r.submitted_by as string | null) ?? null,
    submitted_by_id: (r.submitted_by_id as string | null) ?? null,
    cancel_requested_by: (r.cancel_requested_by as string | null) ?? null,
    retry_of: (r.retry_of as string | null) ?? null,
    retried_by: [],
    created_at: time(r.created_at)!,
    finished_at: time(r.finished_at),
  };
}
