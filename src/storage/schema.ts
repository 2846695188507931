import type pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { auditStatements } from "./audit-schema.js";
import { eventStatements } from "./events-schema.js";
import { uploadStatements } from "./pg-upload-store.js";
import { tokenStatements } from "./tokens-schema.js";
import { sessionStatements } from "./pg-session-store.js";
import { driftStatements } from "./pg-drift-store.js";
import { windowOverrideStatements } from "./pg-window-overrides.js";
import { releaseStatements } from "./pg-release-store.js";
import { notificationStatements } from "./pg-notification-store.js";
import { eventHubStatements } from "./pg-event-hub.js";
import { heldWriteStatements } from "./held-writes.js";

/**
 * manent's own tables, beside DBOS's system tables in the same database. DBOS keeps the
 * checkpoints; these keep what users see: deploy records, step and target progress.
 * Statements are idempotent and run under the schema lock, so several servers can start at once.
 */
export const schemaStatements = [
  `create schema if not exists manent`,
  `create table if not exists manent.deploys (
     id text primary key,
     kind text not null,
     tenant text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     version text not null,
     plugin text,
     status text not null,
     request jsonb not null,
     result jsonb,
     error jsonb,
     submitted_by text,
     created_at timestamptz not null default now(),
     started_at timestamptz,
     finished_at timestamptz
   )`,
  `create index if not exists deploys_tenant_created on manent.deploys (tenant, created_at desc)`,
  `create index if not exists deploys_key on manent.deploys (tenant, application, artifact, environment, created_at desc)`,
  // Each key's last good release (its last succeeded deploy or rollback) in one probe: the drift
  // scheduler looks it up for the keys of the deploys that end, every second of a busy server, and
  // for every key every few seconds; by deploys_key it read every deploy the key keeps.
  `create index if not exists deploys_key_good on manent.deploys (tenant, application, artifact, environment, finished_at desc)
     where kind in ('deploy', 'rollback') and status = 'succeeded'`,
  // The few deploys in progress among all ever kept, counted at each scrape (manent_deploys_in_progress).
  `create index if not exists deploys_in_progress on manent.deploys (status) where status in ('queued', 'running')`,
  `create table if not exists manent.deploy_steps (
     deploy_id text not null references manent.deploys(id) on delete cascade,
     seq integer not null,
     name text not null,
     status text not null,
     attempts integer not null default 0,
     started_at timestamptz,
     finished_at timestamptz,
     duration_ms integer,
     output jsonb,
     error jsonb,
     primary key (deploy_id, name)
   )`,
  // A step's checkpoint (engine/step-runner.ts): set by its last attempt's end, null while it may
  // run (again). 'succeeded', 'failed', or 'exhausted' (failed, the last of its retries).
  `alter table manent.deploy_steps add column if not exists outcome text`,
  `create table if not exists manent.deploy_targets (
     deploy_id text not null references manent.deploys(id) on delete cascade,
     phase text not null,
     host text not null,
     status text not null,
     duration_ms integer,
     error text,
     details jsonb,
     updated_at timestamptz not null default now(),
     primary key (deploy_id, phase, host)
   )`,
  `alter table manent.deploys add column if not exists rollout jsonb`,
  `create table if not exists manent.deploy_commands (
     deploy_id text not null references manent.deploys(id) on delete cascade,
     seq bigserial,
     command text not null,
     full_promote boolean not null default false,
     sent_by text,
     sent_at timestamptz not null default now(),
     during text,
     primary key (deploy_id, seq)
   )`,
  // A user's cancel and the two points of a deploy that decide what it means (see engine/user-cancel.ts).
  `alter table manent.deploys add column if not exists cancel_requested_at timestamptz`,
  `alter table manent.deploys add column if not exists deploy_started_at timestamptz`,
  `alter table manent.deploys add column if not exists no_rollback_reason text`,
  `alter table manent.deploys add column if not exists committed_at timestamptz`,
  // Who submitted, as the principal id separation of duties compares (submitted_by is the name shown).
  `alter table manent.deploys add column if not exists submitted_by_id text`,
  // The number of the rollout state's last write: a resumed workflow replaying its transitions does
  // not write an older state over it (a command sent meanwhile would be refused as "not paused").
  `alter table manent.deploys add column if not exists rollout_revision integer`,
  // A retry (manent retry) names the deploy it retries; the retried one lists its retries by this index.
  `alter table manent.deploys add column if not exists retry_of text`,
  `create index if not exists deploys_retry_of on manent.deploys (retry_of) where retry_of is not null`,
  // Where the envconfig a deploy runs came from (provider, path, sha256, git commit), resolved once at submission.
  `alter table manent.deploys add column if not exists envconfig jsonb`,
  // What a queued deploy waits for before it starts (a deploy window: deploy_windows in manent.yml).
  `alter table manent.deploys add column if not exists waiting jsonb`,
  // The deploy of each key that may run now (see PgDeployStore.claimKey): one row per key, taken in one statement.
  `create table if not exists manent.deploy_key_runs (
     tenant text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     deploy_id text not null,
     primary key (tenant, application, artifact, environment)
   )`,
  // An envconfig change's auto-deploy, claimed once per key and content by whichever server sees it first.
  `create table if not exists manent.auto_deploys (
     tenant text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     sha256 text not null,
     commit text not null,
     deploy_id text,
     error text,
     created_at timestamptz not null default now(),
     primary key (tenant, application, artifact, environment, sha256)
   )`,
  `create table if not exists manent.plugin_capabilities (
     name text primary key,
     capabilities jsonb not null,
     updated_at timestamptz not null default now()
   )`,
];

const schemaLock = 0x6d616e656e74; // "manent"

/**
 * Runs `fn` holding manent's schema lock (a session-level Postgres advisory lock), so servers
 * started together change the schema one at a time: manent's tables ({@link migrate}) and DBOS's
 * system tables (created by its launch, which takes no lock of its own: two servers running it at
 * once on a fresh database failed with "deadlock detected" or "tuple concurrently updated").
 * Each server waits its turn, logging that it does.
 */
export async function underSchemaLock<T>(pool: pg.Pool, logger: Logger, fn: () => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out client has no pool listener: a connection lost meanwhile (Postgres restarting)
  // would be an unhandled 'error' event. The unlock fails with it instead.
  const swallow = (): void => undefined;
  client.on("error", swallow);
  let broken = false;
  try {
    // Tried again and again rather than waited for in `pg_advisory_lock`: a statement waiting holds a
    // snapshot, and DBOS's CREATE INDEX CONCURRENTLY under the lock waits for every snapshot to go,
    // a deadlock Postgres does not detect.
    for (let delayMs = 50; ; delayMs = Math.min(delayMs * 2, 1000)) {
      const r = await client.query<{ locked: boolean }>("select pg_try_advisory_lock($1) as locked", [schemaLock]);
      if (r.rows[0]?.locked) break;
      if (delayMs === 50) logger.info("another server is changing the database schema: waiting for it", {});
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
    return await fn();
  } finally {
    await client.query("select pg_advisory_unlock($1)", [schemaLock]).catch(() => {
      broken = true; // the session, and its lock, are gone: the connection is dropped, not reused
    });
    client.removeListener("error", swallow);
    client.release(broken);
  }
}

/** Creates or updates manent's tables: statements that are idempotent, run {@link underSchemaLock}. */
export async function migrate(pool: pg.Pool): Promise<void> {
  // Events and audit last: their triggers attach to the tables above.
  for (const sql of [
    ...schemaStatements,
    ...heldWriteStatements,
    ...uploadStatements,
    ...tokenStatements,
    ...sessionStatements,
    ...driftStatements,
    ...windowOverrideStatements,
    ...eventStatements,
    ...releaseStatements,
    ...notificationStatements,
    ...eventHubStatements,
    ...auditStatements,
  ])
    await pool.query(sql);
}
