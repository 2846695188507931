import type pg from "pg";
import type { UploadsConfig } from "../core/config/uploads-config.js";
import { Code, ManentError } from "../core/errors.js";
import { inTransaction } from "./database-pool.js";
import { lockTenantUploads } from "./pg-upload-store.js";
import { dbosSchema } from "./reconcile-deploys.js";

/** A deploy that needs an upload, and why. */
export interface UploadNeed {
  sha256: string;
  /** The deploy (the release, for `release_in_progress`). */
  deploy: string;
  application: string;
  artifact: string;
  /** The deploy's environment (the release's, comma-separated, for `release_in_progress`). */
  environment: string;
  version: string;
  status: string;
  /**
   * `in_progress`: a queued or running deploy may still fetch it (also one submitted and not recorded
   * yet); `release`: one of the last versions released there; `release_in_progress`: a running
   * release deploys it at its next stages.
   */
  reason: "in_progress" | "release" | "release_in_progress";
}

/** What a sweep removed (or, in a dry run, would remove). */
export interface SweptUpload {
  tenant: string;
  sha256: string;
  size: number;
}

/**
 * The deploys of a tenant that need its uploads. A deploy or dry run names an upload in its request
 * (`artifact.source`, or `overrides.source`: upload:<sha256>/<file>; `artifact.signature` too). It needs it while it is
 * queued or running (it may still fetch it, also when resumed after a crash), and when its version
 * is one of the last `keepReleases` versions released (succeeded deploys and rollbacks) in its
 * application/artifact/environment: a rollback may return there, and a redeploy of that version
 * (onto a new target, or after the plugin's own copy is gone) fetches the upload again.
 */
const needsSql = `
  with claimed as (
    select c.sha256, c.id as deploy, c.application, c.artifact, c.environment, c.version,
           case when w.workflow_uuid is null then 'submitting' else 'queued' end as status
      from manent.upload_claims c
      left join ${dbosSchema}.workflow_status w on w.workflow_uuid = c.id
     where c.tenant = $1 and ($3::text is null or c.sha256 = $3)
       and not exists (select 1 from manent.deploys d where d.id = c.id)
       and not exists (select 1 from manent.releases r where r.id = c.id)
       and (w.status in ('ENQUEUED', 'PENDING', 'DELAYED')
            or (w.workflow_uuid is null and c.claimed_at > now() - make_interval(secs => $4::double precision / 1000)))
  ), named as (
    -- The artifact's upload, and its signature's (artifact.signature) when that is an upload too.
    select d.id, d.kind, d.application, d.artifact, d.environment, d.version, d.status, u.sha256
      from manent.deploys d
     cross join lateral (values
             (substring(coalesce(d.request->'overrides'->>'source', d.request->'descriptor'->'artifact'->>'source')
                        from '^upload:([0-9a-f]{64})/')),
             (substring(d.request->'descriptor'->'artifact'->>'signature' from '^upload:([0-9a-f]{64})/'))
           ) as u(sha256)
     where d.tenant = $1 and d.kind in ('deploy', 'dry_run')
  ), releases as (
    select application, artifact, environment, version,
           row_number() over (partition by application, artifact, environment order by max(finished_at) desc) as n
      from manent.deploys
     where tenant = $1 and status = 'succeeded' and kind in ('deploy', 'rollback')
     group by application, artifact, environment, version
  )
  select n.sha256, n.id as deploy, n.application, n.artifact, n.environment, n.version, n.status,
         case when n.status in ('queued', 'running') then 'in_progress' else 'release' end as reason
    from named n
    left join releases r
      on r.application = n.application and r.artifact = n.artifact and r.environment = n.environment
     and r.version = n.version and r.n <= $2
   where n.sha256 is not null and ($3::text is null or n.sha256 = $3)
     and (n.status in ('queued', 'running') or (n.kind = 'deploy' and r.n is not null))
  union all
  select sha256, deploy, application, artifact, environment, version, status, 'in_progress' from claimed
  union all
  select substring(r.source from '^upload:([0-9a-f]{64})/'), r.id, r.application, r.artifact,
         array_to_string(r.environments, ','), r.version, r.status, 'release_in_progress'
    from manent.releases r
   where r.tenant = $1 and r.status = 'running'
     and ($3::text is null or substring(r.source from '^upload:([0-9a-f]{64})/') = $3)
     and substring(r.source from '^upload:([0-9a-f]{64})/') is not null
   order by reason, deploy`;

/**
 * How long the claim of a submission whose workflow is not queued yet keeps its upload: past it,
 * a deletion may remove the upload, and the submission, if it still goes on, is refused when it
 * queues (its claim is checked under the tenant's lock, see PgUploadStore.whileClaimed). It only
 * bounds how long a server killed mid-submission blocks a deletion; it decides nothing about safety.
 */
export const submittingClaimMs = 10 * 60_000;

/**
 * Which uploads deploys still need, deletion refused for those, and the sweep that removes the
 * others (see docs/operations/uploads.md). Every change to a tenant's uploads holds its lock.
 */
export class UploadRetention {
  constructor(
    private readonly pool: pg.Pool,
    private readonly config: UploadsConfig["retention"],
  ) {}

  /** The deploys that need the tenant's uploads (one upload's, with `sha256`). */
  async needs(tenant: string, sha256?: string, client: pg.Pool | pg.PoolClient = this.pool): Promise<UploadNeed[]> {
    const r = await client.query<UploadNeed>(needsSql, [tenant, this.config.keep_releases, sha256 ?? null, submittingClaimMs]);
    return r.rows;
  }

  /**
   * Deletes one upload, unless a deploy needs it: then `aborted` (HTTP 409) naming the deploy. An
   * upload the tenant does not have is `not_found`.
   */
  async remove(tenant: string, sha256: string): Promise<{ sha256: string; size: number }> {
    return inTransaction(this.pool, async (client) => {
      await lockTenantUploads(client, tenant);
      await forgetSettledClaims(client, tenant);
      const needs = await this.needs(tenant, sha256, client);
      const first = needs[0];
      if (first) {
        const others = needs.length > 1 ? ` (and ${needs.length - 1} more)` : "";
        const why =
          first.status === "submitting"
            ? "being submitted, not recorded yet: try again once it is"
            : first.reason === "in_progress"
              ? `${first.status}: it may still fetch it`
              : first.reason === "release_in_progress"
                ? `${first.status}: its next stages deploy it`
                : `one of the last ${this.config.keep_releases} versions released there (uploads.retention.keep_releases): a rollback may return to it`;
        const by =
          first.reason === "release_in_progress"
            ? `release ${first.deploy} of ${first.application} (${first.environment})`
            : `deploy ${first.deploy} of ${first.application}/${first.environment}`;
        throw new ManentError(
          Code.Aborted,
          `upload ${sha256} is needed by ${by} version ${first.version} (${why})${others}; it is not removed`,
          { details: { deploy: first.deploy, reason: first.reason } },
        );
      }
      const deleted = await client.query<{ size: string }>("delete from manent.uploads where tenant = $1 and sha256 = $2 returning size", [
        tenant,
        sha256,
      ]);
      if (!deleted.rows[0]) throw new ManentError(Code.NotFound, `no upload ${sha256} for tenant ${tenant}`);
      await client.query("delete from manent.upload_chunks where tenant = $1 and sha256 = $2", [tenant, sha256]);
      return { sha256, size: Number(deleted.rows[0].size) };
    });
  }

  /**
   * Removes the uploads no deploy needs that are older than min_age (since uploaded or last named
   * by a submission), of one tenant or of all; with `dryRun`, only says which.
   */
  async sweep(opts: { tenant?: string; dryRun?: boolean } = {}): Promise<SweptUpload[]> {
    const tenants =
      opts.tenant !== undefined
        ? [opts.tenant]
        : (await this.pool.query<{ tenant: string }>("select distinct tenant from manent.uploads order by tenant")).rows.map(
            (r) => r.tenant,
          );
    const removed: SweptUpload[] = [];
    for (const tenant of tenants) {
      const swept = await inTransaction(this.pool, async (client) => {
        await lockTenantUploads(client, tenant);
        if (!opts.dryRun) await forgetSettledClaims(client, tenant);
        const needed = [...new Set((await this.needs(tenant, undefined, client)).map((n) => n.sha256))];
        // One statement: an upload a submission claims meanwhile is re-checked against its new last_used_at.
        const old = `tenant = $1 and greatest(created_at, coalesce(last_used_at, created_at)) < now() - make_interval(secs => $2::double precision / 1000)
                     and not (sha256 = any($3::text[]))`;
        const args = [tenant, this.config.min_age, needed];
        if (opts.dryRun) {
          return (await client.query<{ sha256: string; size: string }>(`select sha256, size from manent.uploads where ${old}`, args)).rows;
        }
        const rows = (
          await client.query<{ sha256: string; size: string }>(`delete from manent.uploads where ${old} returning sha256, size`, args)
        ).rows;
        if (rows.length)
          await client.query("delete from manent.upload_chunks where tenant = $1 and sha256 = any($2::text[])", [
            tenant,
            rows.map((r) => r.sha256),
          ]);
        return rows;
      });
      removed.push(...swept.map((r) => ({ tenant, sha256: r.sha256, size: Number(r.size) })));
    }
    return removed;
  }
}

/**
 * Drops the claims that keep nothing any more (with the tenant's lock held): the deploy's record
 * exists (it says what the deploy needs), its workflow has ended, or its submission stopped before
 * queueing it and is past {@link submittingClaimMs}.
 */
async function forgetSettledClaims(client: pg.PoolClient, tenant: string): Promise<void> {
  await client.query(
    `delete from manent.upload_claims c
      where c.tenant = $1
        and (exists (select 1 from manent.deploys d where d.id = c.id)
             or exists (select 1 from manent.releases r where r.id = c.id)
             or exists (select 1 from ${dbosSchema}.workflow_status w
                         where w.workflow_uuid = c.id and w.status not in ('ENQUEUED', 'PENDING', 'DELAYED'))
             or (not exists (select 1 from ${dbosSchema}.workflow_status w where w.workflow_uuid = c.id)
                 and c.claimed_at <= now() - make_interval(secs => $2::double precision / 1000)))`,
    [tenant, submittingClaimMs],
  );
}
