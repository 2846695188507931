import type pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { terminalStatuses } from "../core/engine/deploy-store.js";

/** DBOS's system tables, in the same database (DBOS's default schema). */
export const dbosSchema = "dbos";

/**
 * Ends the deploy records that no workflow will ever finish, at start-up: a record whose workflow
 * does not exist (written by a server that recorded before it queued, and was killed in between)
 * and a record whose workflow ended without writing its outcome (a cancel or a crash between the
 * two writes). Runs on every server start; every update is conditional, so servers starting
 * together do not clash.
 */
export async function reconcileDeploys(pool: pg.Pool, logger: Logger): Promise<void> {
  const terminal = [...terminalStatuses];
  const orphans = await pool.query<{ id: string }>(
    `update manent.deploys d set status = 'failed', finished_at = coalesce(d.finished_at, now()), error = $2::jsonb
     where d.status <> all($1::text[])
       and not exists (select 1 from ${dbosSchema}.workflow_status w where w.workflow_uuid = d.id)
     returning d.id`,
    [
      terminal,
      JSON.stringify({
        code: "unavailable",
        message: "the server stopped while this deploy was being submitted, before its workflow was queued; nothing ran: submit it again",
      }),
    ],
  );
  const ended = await pool.query<{ id: string; status: string }>(
    `update manent.deploys d
       set status = case when w.status = 'CANCELLED' then 'cancelled' else 'failed' end,
           finished_at = coalesce(d.finished_at, now()),
           error = case when w.status = 'CANCELLED'
             then jsonb_build_object('code', 'canceled', 'message', 'cancelled by a user before it started')
             else jsonb_build_object('code', 'internal', 'message', 'the deploy''s workflow ended (' || w.status || ') without recording its outcome')
           end
     from ${dbosSchema}.workflow_status w
     where w.workflow_uuid = d.id and d.status <> all($1::text[])
       and w.status in ('CANCELLED', 'ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')
     returning d.id, d.status`,
    [terminal],
  );
  for (const { id } of orphans.rows) logger.warn("deploy without a workflow marked failed", { deploy: id });
  for (const { id, status } of ended.rows) logger.warn("deploy whose workflow had ended marked as such", { deploy: id, status });
}

/**
 * Deploys queued by a server of another manent version, which DBOS's queue would never give to
 * this one: nothing of them ran, so they are stamped with this version and run here as submitted,
 * in their place in the queue. One conditional update: a deploy an old server takes at the same
 * moment is no longer queued and is left to it. A newer version's (launched on this database after
 * this one, in dbos.application_versions) are left to its servers: an older build may not run them.
 */
export async function requeueOtherVersions(pool: pg.Pool, version: string, logger: Logger): Promise<void> {
  const moved = await pool.query<{ id: string; was: string }>(
    `update ${dbosSchema}.workflow_status w set application_version = $1
     from (select workflow_uuid, application_version as was from ${dbosSchema}.workflow_status
           where status = 'ENQUEUED' and name = 'manent.deploy' and application_version <> $1
             and not exists (select 1 from ${dbosSchema}.application_versions theirs, ${dbosSchema}.application_versions mine
                             where theirs.version_name = workflow_status.application_version and mine.version_name = $1
                               and theirs.version_timestamp > mine.version_timestamp)
           for update of workflow_status) old
     where w.workflow_uuid = old.workflow_uuid and w.status = 'ENQUEUED'
     returning w.workflow_uuid as id, old.was`,
    [version],
  );
  for (const { id, was } of moved.rows)
    logger.warn("deploy queued by another manent version queued under this one", { deploy: id, was_version: was });
}
