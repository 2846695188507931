import type pg from "pg";
import type { ArtifactVerification } from "../core/verification/verification-result.js";
import type { Capability, TargetResult } from "../core/contract/index.js";
import {
  terminalStatuses,
  type CancelState,
  type DeployKey,
  type DeployRecord,
  type DeployStatus,
  type DeployStore,
  type ListFilter,
  type NewDeploy,
  type RunStart,
  type StepBegin,
  type StepEnd,
  type StepOwner,
  type StepRecord,
  type StepStatus,
  type TargetProgress,
  type DeployWaiting,
  type WriteHold,
} from "../core/engine/deploy-store.js";
import type { EnvconfigOrigin } from "../core/config/index.js";
import type { ErrorJSON } from "../core/errors.js";
import type { NewAuditEntry } from "../core/identity/index.js";
import { dbosSchema } from "./reconcile-deploys.js";
import { pipelinedTransaction } from "./database-pool.js";
import { HeldWrites } from "./held-writes.js";
import { scopeCondition } from "./scope-sql.js";
import { auditEntryValues, insertAuditEntry } from "./pg-audit-log.js";
import type { OverviewDeploy, OverviewDrift, OverviewEntry, OverviewFilter, OverviewSource } from "../core/environments/overview.js";
import type { CommandRecord, RolloutState } from "../core/rollout/rollout-state.js";

const deployColumns = `id, kind, tenant, application, artifact, environment, version, plugin, status, error,
  submitted_by, submitted_by_id, retry_of, envconfig, created_at, started_at, finished_at`;

/** A new deploy's record, queued, from {@link newDeployValues} ($1–$12); written again, it changes nothing. */
const insertQueuedDeploy = `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request, submitted_by, submitted_by_id, retry_of, envconfig)
  values ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11, $12) on conflict (id) do nothing`;

/** The columns of a deploy's record written at its start, and their values: {@link newDeployValues} ($1–$12) and `plugin`. */
const runningColumns = `id, kind, tenant, application, artifact, environment, version, status, request, submitted_by, submitted_by_id, retry_of, envconfig, started_at, plugin`;
const runningRow = (plugin: string) => `$1, $2, $3, $4, $5, $6, $7, 'running', $8, $9, $10, $11, $12, now(), ${plugin}`;
/** A start of a record already written: marked running (its plugin kept if the start names none), unless it ended. */
const onConflictRunning = `on conflict (id) do update set status = 'running', started_at = coalesce(manent.deploys.started_at, now()),
  plugin = coalesce(excluded.plugin, manent.deploys.plugin) where manent.deploys.status in ('queued', 'running')`;

/**
 * The claim of a deploy key's row (see `claimKey`), as the CTEs `claim` and `input_dropped` of a
 * WITH: `row` gives (tenant, application, artifact, environment, deploy_id), a VALUES list or a
 * SELECT; `key` the parameters holding the key's tenant, application, artifact and environment;
 * `terminal` the parameter holding the terminal statuses. Taken unless its holder still runs;
 * `claim` returns the new holder.
 *
 * `input_dropped` deletes the DBOS input of the key's previous holder once its workflow has ended
 * (SUCCESS or ERROR, which nothing resumes): DBOS reads a workflow's input only to run it (a
 * dequeue, a recovery, a fork), and manent reads a deploy from its own record (the submission,
 * the `resolve` step's settings), so the input of an ended deploy was kept for nothing, 1.3 KB of
 * each deploy (bench/README.md, deploy-commits). Here, in the statement that starts the key's next
 * deploy, it costs no commit of its own; the key's newest deploy keeps its input. A workflow still
 * queued, running, cancelled or past its recovery attempts keeps its input: DBOS may run it again.
 * The statement's snapshot may see an older holder than the row the claim takes (a concurrent
 * claim): whichever it sees is deleted only if it has ended, which is always safe.
 */
const keyClaim = (row: string, key: [string, string, string, string], terminal: string) => `prev as (
    select deploy_id from manent.deploy_key_runs
    where tenant = ${key[0]} and application = ${key[1]} and artifact = ${key[2]} and environment = ${key[3]}),
  input_dropped as (
    delete from ${dbosSchema}.workflow_input i using prev, ${dbosSchema}.workflow_status w
    where i.workflow_uuid = prev.deploy_id and w.workflow_uuid = prev.deploy_id
      and w.name = 'manent.deploy' and w.status in ('SUCCESS', 'ERROR')),
  claim as (insert into manent.deploy_key_runs as k (tenant, application, artifact, environment, deploy_id)
  ${row}
  on conflict (tenant, application, artifact, environment) do update set deploy_id = excluded.deploy_id
    where k.deploy_id = excluded.deploy_id
      or not exists (select 1 from ${dbosSchema}.workflow_status w
                     where w.workflow_uuid = k.deploy_id and w.status in ('ENQUEUED', 'PENDING'))
      or exists (select 1 from manent.deploys d where d.id = k.deploy_id and d.status = any(${terminal}::text[]))
  returning deploy_id)`;

/** A started deploy's time in the queue, in milliseconds (a `returning` column of the start). */
const queuedMs = `(extract(epoch from (manent.deploys.started_at - manent.deploys.created_at)) * 1000)::float8 as queued_ms`;

export class PgDeployStore implements DeployStore, OverviewSource {
  private readonly held: HeldWrites;

  /**
   * `retry` runs a transaction again while the database is away (as the pool given may do for its
   * queries); `onHeldError` hears of a held write that could not be committed (held-writes.ts).
   */
  constructor(
    private readonly pool: pg.Pool,
    opts: { retry?: <T>(fn: () => Promise<T>) => Promise<T>; onHeldError?: (deployId: string, err: unknown) => void } = {},
  ) {
    const retry = opts.retry ?? ((fn) => fn());
    this.held = new HeldWrites(
      pool,
      (statements, onError) => retry(() => pipelinedTransaction(pool, statements, onError)),
      opts.onHeldError ?? (() => undefined),
    );
  }

  /** A statement of deploy `id`'s, committed with the writes held for it (see {@link HeldWrites}). */
  private q<R extends pg.QueryResultRow = pg.QueryResultRow>(id: string, sql: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    return this.held.query<R>(id, sql, params);
  }

  async flushHeld(): Promise<void> {
    await this.held.flush();
  }

  /** Deploys of the whole fleet queued and running (an index of the few in progress). */
  async inProgress(): Promise<{ queued: number; running: number }> {
    const r = await this.pool.query<{ queued: number; running: number }>(
      `select count(*) filter (where status = 'queued')::int as queued, count(*) filter (where status = 'running')::int as running
       from manent.deploys where status in ('queued', 'running')`,
    );
    return r.rows[0] ?? { queued: 0, running: 0 };
  }

  async createDeploy(d: NewDeploy, audit?: NewAuditEntry): Promise<void> {
    if (!audit) await this.pool.query(insertQueuedDeploy, newDeployValues(d));
    else
      await this.pool.query(`with created as (${insertQueuedDeploy}), audited as (${insertAuditEntry(13)}) select 1`, [
        ...newDeployValues(d),
        ...auditEntryValues(audit),
      ]);
  }

  async createQueuedDeploy(d: NewDeploy, queue: string, partition: string, audit?: NewAuditEntry): Promise<{ behind?: string }> {
    // One statement instead of DBOS's status read and its list of the whole queue (which grew with the backlog).
    // A data-modifying CTE runs whether or not it is read: the audit entry is written even when the
    // deploy's insert finds the row its workflow wrote first.
    const r = await this.pool.query<{ queued_before: string | null; running: string | null }>(
      `with created as (${insertQueuedDeploy}),${audit ? ` audited as (${insertAuditEntry(15)}),` : ""}
       mine as (select created_at from ${dbosSchema}.workflow_status where workflow_uuid = $1 and status = 'ENQUEUED'),
       partition as (
         select w.workflow_uuid, w.status, w.created_at from ${dbosSchema}.workflow_status w
         where w.queue_name = $13 and w.queue_partition_key = $14 and w.status in ('ENQUEUED', 'PENDING') and w.workflow_uuid <> $1)
       select
         (select p.workflow_uuid from partition p, mine where p.status = 'ENQUEUED' and p.created_at < mine.created_at
           order by p.created_at desc limit 1) as queued_before,
         (select p.workflow_uuid from partition p, mine where p.status = 'PENDING' limit 1) as running`,
      [...newDeployValues(d), queue, partition, ...(audit ? auditEntryValues(audit) : [])],
    );
    const row = r.rows[0];
    const behind = row?.queued_before ?? row?.running ?? undefined;
    return behind ? { behind } : {};
  }

  async setStatus(id: string, status: DeployStatus, extra: { error?: ErrorJSON | null; plugin?: string } = {}): Promise<void> {
    await this.q(
      id,
      `update manent.deploys set status = $2,
         error = case when $3::boolean then $4::jsonb else error end,
         plugin = coalesce($5, plugin),
         started_at = case when $2 = 'running' then coalesce(started_at, now()) else started_at end,
         finished_at = case when $2 = any($6::text[]) then coalesce(finished_at, now()) else finished_at end
       where id = $1`,
      [
        id,
        status,
        extra.error !== undefined,
        extra.error ? JSON.stringify(extra.error) : null,
        extra.plugin ?? null,
        [...terminalStatuses],
      ],
    );
  }

  async stepStarted(id: string, seq: number, name: string, opts: { unlessCancelled?: boolean } = {}): Promise<boolean> {
    const rows = await this.q<{ cancelled: boolean }>(
      id,
      `with cancel as (
         select $4::boolean and exists (select 1 from manent.deploys where id = $1 and cancel_requested_at is not null) as cancelled),
       started as (
         insert into manent.deploy_steps (deploy_id, seq, name, status, attempts, started_at)
         select $1, $2, $3, 'running', 1, now() from cancel where not cancel.cancelled
         on conflict (deploy_id, name) do update set status = 'running', attempts = manent.deploy_steps.attempts + 1,
           error = null, finished_at = null)
       select cancelled from cancel`,
      [id, seq, name, opts.unlessCancelled === true],
    );
    return rows.rows[0]?.cancelled !== true;
  }

  async stepFinished(id: string, name: string, status: StepStatus, output: unknown, error?: ErrorJSON): Promise<void> {
    await this.q(
      id,
      `update manent.deploy_steps set status = $3, finished_at = now(),
         duration_ms = (extract(epoch from (now() - started_at)) * 1000)::int,
         output = $4::jsonb, error = $5::jsonb
       where deploy_id = $1 and name = $2`,
      [
        id,
        name,
        status,
        output === undefined ? null : JSON.stringify({ result: JSON.stringify(output) }),
        error ? JSON.stringify(error) : null,
      ],
    );
  }

  async beginStep(
    id: string,
    seq: number,
    name: string,
    opts: { unlessCancelled: boolean; owner?: StepOwner | undefined },
  ): Promise<StepBegin> {
    // One statement: the checks DBOS makes before a step (cancelled? recorded already?), manent's
    // user cancel, and the attempt's start with its step.started event.
    const r = await this.q<{
      verdict: "run" | "checkpointed" | "user_cancel" | "workflow_cancelled" | "not_owner";
      attempt: number | null;
      outcome: string | null;
      attempts: number | null;
      output: { result: string } | null;
      error: ErrorJSON | null;
    }>(
      id,
      `with wf as (
         select status, owner_xid from ${dbosSchema}.workflow_status where workflow_uuid = $5),
       prev as (
         select outcome, attempts, output, error from manent.deploy_steps where deploy_id = $1 and name = $3),
       verdict as (
         select case
           when $5::text is not null and (select status from wf) = 'CANCELLED' then 'workflow_cancelled'
           when $5::text is not null and (select owner_xid from wf) is distinct from $6::text then 'not_owner'
           when (select outcome from prev) is not null then 'checkpointed'
           when $4::boolean and exists (select 1 from manent.deploys where id = $1 and cancel_requested_at is not null) then 'user_cancel'
           else 'run' end as v),
       started as (
         insert into manent.deploy_steps (deploy_id, seq, name, status, attempts, started_at)
         select $1, $2, $3, 'running', 1, now() from verdict where v = 'run'
         on conflict (deploy_id, name) do update set status = 'running', attempts = manent.deploy_steps.attempts + 1,
           error = null, finished_at = null
           where manent.deploy_steps.outcome is null
         returning attempts)
       select verdict.v as verdict, (select attempts from started) as attempt,
         prev.outcome, prev.attempts, prev.output, prev.error
       from verdict left join prev on true`,
      [id, seq, name, opts.unlessCancelled, opts.owner?.workflowId ?? null, opts.owner?.token ?? null],
    );
    const row = r.rows[0]!;
    switch (row.verdict) {
      case "run":
        // Another execution checkpointed the step between this statement's read and its write.
        return row.attempt === null ? { run: false, reason: "not_owner" } : { run: true, attempt: row.attempt };
      case "checkpointed":
        return {
          run: false,
          reason: "checkpointed",
          status: row.outcome === "succeeded" ? "succeeded" : "failed",
          exhausted: row.outcome === "exhausted",
          attempts: row.attempts ?? 1,
          output: row.output === null ? undefined : (JSON.parse(row.output.result) as unknown),
          error: row.error,
        };
      default:
        return { run: false, reason: row.verdict };
    }
  }

  async endStep(id: string, name: string, attempt: number, end: StepEnd, owner?: StepOwner, hold?: WriteHold): Promise<boolean> {
    // The owner's row is locked until this statement commits, as DBOS does before recording a step:
    // a hand-off of the workflow to another execution cannot land between the check and the write.
    const sql = `with owner as (
         select 1 from ${dbosSchema}.workflow_status where workflow_uuid = $7 and owner_xid = $8 for no key update)
       update manent.deploy_steps set status = $3, finished_at = now(),
         duration_ms = (extract(epoch from (now() - started_at)) * 1000)::int,
         output = $4::jsonb, error = $5::jsonb, outcome = $9
       where deploy_id = $1 and name = $2 and attempts = $6 and status = 'running' and outcome is null
         and ($7::text is null or exists (select 1 from owner))
       returning 1`;
    const params = [
      id,
      name,
      end.status,
      end.output === undefined ? null : JSON.stringify({ result: JSON.stringify(end.output) }),
      end.error ? JSON.stringify(end.error) : null,
      attempt,
      owner?.workflowId ?? null,
      owner?.token ?? null,
      end.final === false ? null : end.final === "exhausted" ? "exhausted" : end.status,
    ];
    if (hold) {
      this.held.hold(id, { sql, params, lost: hold.lost, ...(hold.committed && { committed: hold.committed }) });
      return true;
    }
    return (await this.q(id, sql, params)).rowCount === 1;
  }

  async recordTargets(id: string, phase: string, results: TargetResult[]): Promise<void> {
    // One row per host: an upsert cannot touch the same row twice in one statement (the last result wins).
    // In host order, the order of the targets' events (events-schema.ts, target_event_ids).
    const byHost = new Map(results.map((r) => [r.host, r]));
    if (byHost.size === 0) return;
    const rs = [...byHost.values()];
    const sql = `insert into manent.deploy_targets (deploy_id, phase, host, status, duration_ms, error, details, updated_at)
       select $1, $2, u.host, u.status, u.duration_ms, u.error, u.details::jsonb, now()
       from unnest($3::text[], $4::text[], $5::integer[], $6::text[], $7::text[]) as u(host, status, duration_ms, error, details)
       order by u.host
       on conflict (deploy_id, phase, host) do update set status = excluded.status, duration_ms = excluded.duration_ms,
         error = excluded.error, details = excluded.details, updated_at = now()`;
    const params = [
      id,
      phase,
      rs.map((r) => r.host),
      rs.map((r) => r.status),
      rs.map((r) => r.duration_ms ?? null),
      rs.map((r) => r.error ?? null),
      rs.map((r) => (r.details ? JSON.stringify(r.details) : null)),
    ];
    await this.q(id, sql, params);
  }

  async doneTargets(id: string, phase: string): Promise<TargetResult[]> {
    const rows = await this.q<{
      host: string;
      status: TargetResult["status"];
      duration_ms: number | null;
      error: string | null;
      details: Record<string, string> | null;
    }>(
      id,
      `select host, status, duration_ms, error, details from manent.deploy_targets
       where deploy_id = $1 and phase = $2 and status in ('deployed', 'unchanged')`,
      [id, phase],
    );
    return rows.rows.map((r) => ({
      host: r.host,
      status: r.status,
      ...(r.duration_ms !== null && { duration_ms: r.duration_ms }),
      ...(r.error !== null && { error: r.error }),
      ...(r.details !== null && { details: r.details }),
    }));
  }

  async startRun(id: string, d?: NewDeploy, plugin?: string): Promise<RunStart> {
    if (d && d.kind !== "dry_run") {
      const started = await this.startKeyedRun(d, plugin);
      if (started) return started;
    }
    return this.startRunStepwise(id, d, plugin);
  }

  /**
   * {@link startRun} of a deploy whose record the workflow carries, in one statement: the record's
   * status read, the key claimed unless the deploy ended (cancelled while queued), and the record
   * written running if the claim is its own. Undefined in the rare case the claim went to another
   * deploy that no longer holds the key when read after: then the statements one by one decide.
   */
  private async startKeyedRun(d: NewDeploy, plugin: string | undefined): Promise<RunStart | undefined> {
    const r = await this.pool.query<{
      own_status: DeployStatus | null;
      claimed: boolean;
      status: DeployStatus | null;
      queued_ms: number | null;
    }>(
      `with own as (select status from manent.deploys where id = $1),
       ${keyClaim("select $3, $4, $5, $6, $1 where not exists (select 1 from own where status not in ('queued', 'running'))", ["$3", "$4", "$5", "$6"], "$13")},
       started as (insert into manent.deploys (${runningColumns}) select ${runningRow("$14")} from claim ${onConflictRunning} returning status, ${queuedMs})
       select (select status from own) as own_status, exists (select 1 from claim) as claimed,
         (select status from started) as status, (select queued_ms from started) as queued_ms`,
      [...newDeployValues(d), [...terminalStatuses], plugin ?? null],
    );
    const row = r.rows[0]!;
    // Ended already (cancelled while queued): nothing runs.
    if (row.own_status && row.own_status !== "queued" && row.own_status !== "running") return { status: row.own_status };
    if (row.claimed) {
      if (row.status) return { status: row.status, queuedMs: row.queued_ms ?? undefined };
      const now = await this.pool.query<{ status: DeployStatus }>(`select status from manent.deploys where id = $1`, [d.id]);
      return { status: now.rows[0]?.status };
    }
    const holder = await this.keyHolder(d);
    return holder !== undefined && holder !== d.id ? { behind: holder } : undefined;
  }

  private async startRunStepwise(id: string, d?: NewDeploy, plugin?: string): Promise<RunStart> {
    // Statements of their own, each idempotent, through the pool (which rides out a database outage), never a transaction held open.
    const own = await this.pool.query<DeployKey & { kind: string; status: DeployStatus }>(
      `select kind, tenant, application, artifact, environment, status from manent.deploys where id = $1`,
      [id],
    );
    const key = own.rows[0] ?? d;
    // Not there (and nothing to create it from), or ended already (cancelled while queued): nothing runs.
    if (!key || (own.rows[0] && own.rows[0].status !== "queued" && own.rows[0].status !== "running")) {
      return { status: own.rows[0]?.status };
    }
    if (key.kind !== "dry_run") {
      const holder = await this.claimKey(id, key);
      if (holder !== id) return { behind: holder };
    }
    const started = d
      ? await this.pool.query<{ status: DeployStatus; queued_ms: number | null }>(
          `insert into manent.deploys (${runningColumns}) values (${runningRow("$13")}) ${onConflictRunning} returning status, ${queuedMs}`,
          [...newDeployValues(d), plugin ?? null],
        )
      : await this.pool.query<{ status: DeployStatus; queued_ms: number | null }>(
          `update manent.deploys set status = 'running', started_at = coalesce(started_at, now()), plugin = coalesce($2, plugin)
           where id = $1 and status in ('queued', 'running') returning status, ${queuedMs}`,
          [id, plugin ?? null],
        );
    if (started.rows[0]) return { status: started.rows[0].status, queuedMs: started.rows[0].queued_ms ?? undefined };
    const row = await this.pool.query<{ status: DeployStatus }>(`select status from manent.deploys where id = $1`, [id]);
    return { status: row.rows[0]?.status };
  }

  /**
   * DBOS's partitioned queue runs one deploy per key, but two servers dequeuing at once can each
   * start one (each claim reads the queue as it was before the other's). The key's row in
   * `manent.deploy_key_runs` is the second line: one statement takes it for this deploy unless its
   * holder still runs (its workflow queued or running, its record not ended). A second claimer waits
   * on the row's lock and sees the first's claim. Returns the holder.
   */
  private async claimKey(id: string, k: DeployKey): Promise<string> {
    const r = await this.pool.query<{ deploy_id: string }>(
      `with ${keyClaim("values ($2, $3, $4, $5, $1)", ["$2", "$3", "$4", "$5"], "$6")} select deploy_id from claim`,
      [id, k.tenant, k.application, k.artifact, k.environment, [...terminalStatuses]],
    );
    if (r.rows[0]) return r.rows[0].deploy_id;
    return (await this.keyHolder(k)) ?? id;
  }

  /** The deploy that holds the key's row in `manent.deploy_key_runs`, if any. */
  private async keyHolder(k: DeployKey): Promise<string | undefined> {
    const held = await this.pool.query<{ deploy_id: string }>(
      `select deploy_id from manent.deploy_key_runs where tenant = $1 and application = $2 and artifact = $3 and environment = $4`,
      [k.tenant, k.application, k.artifact, k.environment],
    );
    return held.rows[0]?.deploy_id;
  }

  async requestCancel(id: string, cancelledError: ErrorJSON): Promise<CancelState | undefined> {
    const rows = await this.q<CancelState>(
      id,
      `with prev as (
         select id, status, kind, version, deploy_started_at, committed_at, no_rollback_reason
         from manent.deploys where id = $1 for update),
       upd as (
         update manent.deploys d set cancel_requested_at = coalesce(d.cancel_requested_at, now()),
           status = case when prev.status = 'queued' then 'cancelled' else d.status end,
           finished_at = case when prev.status = 'queued' then now() else d.finished_at end,
           error = case when prev.status = 'queued' then $2::jsonb else d.error end
         from prev
         where d.id = prev.id and prev.status <> all($3::text[]) and prev.committed_at is null
           and not (prev.kind = 'rollback' and prev.deploy_started_at is not null)
         returning d.id)
       select prev.status as previous, prev.kind, prev.version, prev.deploy_started_at is not null as deploying,
         prev.committed_at is not null as committed, prev.no_rollback_reason, exists (select 1 from upd) as accepted
       from prev`,
      [id, JSON.stringify(cancelledError), [...terminalStatuses]],
    );
    return rows.rows[0];
  }

  async cancelsRequested(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.pool.query<{ id: string }>(
      `select id from manent.deploys where id = any($1::text[]) and cancel_requested_at is not null`,
      [ids],
    );
    return new Set(rows.rows.map((r) => r.id));
  }

  async beginDeployStep(id: string, noRollbackReason: string | null): Promise<boolean> {
    // Run again after a crash, a gate already passed stays passed.
    const rows = await this.q(
      id,
      `update manent.deploys set deploy_started_at = coalesce(deploy_started_at, now()), no_rollback_reason = $2
       where id = $1 and (cancel_requested_at is null or deploy_started_at is not null) returning id`,
      [id, noRollbackReason],
    );
    return rows.rowCount === 1;
  }

  async commitDeployStep(id: string): Promise<boolean> {
    const rows = await this.q(
      id,
      `update manent.deploys set committed_at = coalesce(committed_at, now())
       where id = $1 and (cancel_requested_at is null or committed_at is not null) returning id`,
      [id],
    );
    return rows.rowCount === 1;
  }

  async setWaiting(id: string, waiting: DeployWaiting | null): Promise<void> {
    await this.q(id, `update manent.deploys set waiting = $2::jsonb where id = $1`, [id, waiting && JSON.stringify(waiting)]);
  }

  async getDeploy(id: string): Promise<DeployRecord | undefined> {
    // One statement (one round trip and one transaction, not five): a deploy is read at every
    // `?wait=` answer and every status page. json (not jsonb) keeps each object's keys in order.
    const deploy = await this.q(
      id,
      `select ${deployColumns}, request, rollout, waiting,
         coalesce((select json_agg(json_build_object('name', s.name, 'status', s.status, 'attempts', s.attempts,
             'started_at', s.started_at, 'duration_ms', s.duration_ms, 'output', s.output, 'error', s.error)
             order by s.seq, s.started_at nulls last, s.name)
           from manent.deploy_steps s where s.deploy_id = d.id), '[]') as steps,
         coalesce((select json_agg(json_build_object('phase', t.phase, 'host', t.host, 'status', t.status,
             'duration_ms', t.duration_ms, 'error', t.error, 'details', t.details) order by t.phase, t.host)
           from manent.deploy_targets t where t.deploy_id = d.id), '[]') as targets,
         array(select r.id from manent.deploys r where r.retry_of = d.id order by r.created_at, r.id) as retried_by,
         case when d.rollout is null then '[]' else coalesce((select json_agg(json_build_object('command', c.command,
             'full_promote', c.full_promote, 'sent_by', c.sent_by, 'sent_at', c.sent_at, 'during', c.during) order by c.seq)
           from manent.deploy_commands c where c.deploy_id = d.id), '[]') end as commands
       from manent.deploys d where d.id = $1`,
      [id],
    );
    const row = deploy.rows[0] as Record<string, unknown> | undefined;
    if (!row) return undefined;
    const rollout = (row.rollout as RolloutState | null) ?? null;
    const steps = (row.steps as Record<string, unknown>[]).map((s) => ({
      ...(s as unknown as StepRecord),
      started_at: isoText(s.started_at),
    }));
    const commands = (row.commands as Record<string, unknown>[]).map((c): CommandRecord => ({
      command: c.command as CommandRecord["command"],
      full: c.full_promote as boolean,
      by: (c.sent_by as string | null) ?? null,
      at: isoText(c.sent_at)!,
      during: (c.during as string | null) ?? null,
    }));
    return {
      ...toDeploy(row),
      request: row.request as Record<string, unknown>,
      retried_by: row.retried_by as string[],
      rollout: rollout && { ...rollout, commands },
      waiting: (row.waiting as DeployWaiting | null) ?? null,
      steps,
      targets: row.targets as TargetProgress[],
      verification: verificationOf(steps),
    };
  }

  async listDeploys(
    f: ListFilter,
  ): Promise<Omit<DeployRecord, "steps" | "targets" | "request" | "rollout" | "retried_by" | "verification">[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    for (const key of ["tenant", "application", "environment", "artifact", "status"] as const) {
      const value = f[key];
      if (value !== undefined) {
        args.push(value);
        where.push(`${key} = $${args.length}`);
      }
    }
    const visible = f.scopes && scopeCondition(f.scopes, args);
    if (visible) where.push(visible);
    args.push(f.limit ?? 50);
    const rows = await this.pool.query(
      `select ${deployColumns} from manent.deploys ${where.length ? `where ${where.join(" and ")}` : ""}
       order by created_at desc, id desc limit $${args.length}`,
      args,
    );
    return rows.rows.map((r: Record<string, unknown>) => toDeploy(r));
  }

  /**
   * Per application, artifact and environment: the last release that succeeded, the last deploy and
   * the newest one in progress (dry-runs change nothing, so they are left out). Each is one `distinct
   * on` over the deploys_key index; at most `overviewLimit` cells.
   */
  async overviewEntries(f: OverviewFilter): Promise<OverviewEntry[]> {
    const where = [`kind in ('deploy', 'rollback')`];
    const args: unknown[] = [];
    for (const key of ["tenant", "application"] as const) {
      const value = f[key];
      if (value !== undefined) where.push(`${key} = $${args.push(value)}`);
    }
    const visible = f.scopes && scopeCondition(f.scopes, args);
    if (visible) where.push(visible);
    const key = "tenant, application, artifact, environment";
    const cols = `${key}, id, kind, version, status, submitted_by, created_at, finished_at`;
    const scoped = `select ${cols}, rollout, envconfig from manent.deploys where ${where.join(" and ")}`;
    const { rows } = await this.pool.query(
      `with scoped as (${scoped}),
       firsts as (select ${key}, min(created_at) as first_at from scoped group by ${key} order by ${key} limit ${overviewLimit}),
       live as (select distinct on (${key}) ${cols}, envconfig from scoped where status = 'succeeded' order by ${key}, finished_at desc, id desc),
       last as (select distinct on (${key}) ${cols} from scoped order by ${key}, created_at desc, id desc),
       active as (select distinct on (${key}) ${cols}, rollout from scoped where status in ('queued', 'running')
                  order by ${key}, created_at desc, id desc),
       drift as (select ${key}, count(*) filter (where state = 'drifted') as drifted,
                        count(*) filter (where state = 'error') as errors, count(*) filter (where state = 'unknown') as unknown,
                        count(*) as targets, max(checked_at) as checked_at
                 from manent.drift_targets join firsts using (${key}) group by ${key})
       select f.tenant, f.application, f.artifact, f.environment, f.first_at,
              to_jsonb(live) as live, to_jsonb(last) as last, to_jsonb(active) as active,
              drift.drifted, drift.errors, drift.unknown, drift.targets, drift.checked_at as drift_checked_at
       from firsts f
       join last using (${key})
       left join live using (${key})
       left join active using (${key})
       left join drift using (${key})`,
      args,
    );
    return rows.map((r: Record<string, unknown>): OverviewEntry => {
      const active = r.active as (Record<string, unknown> & { rollout: RolloutState | null }) | null;
      return {
        tenant: r.tenant as string,
        application: r.application as string,
        artifact: r.artifact as string,
        environment: r.environment as string,
        first_at: iso(r.first_at)!,
        live: r.live ? overviewDeploy(r.live as Record<string, unknown>) : null,
        last: overviewDeploy(r.last as Record<string, unknown>),
        in_progress: active && { ...overviewDeploy(active), rollout: active.rollout ?? null },
        drift: r.targets == null ? null : overviewDrift(r),
        live_envconfig: (r.live as { envconfig?: EnvconfigOrigin | null } | null)?.envconfig ?? null,
      };
    });
  }

  async lastSucceeded(key: DeployKey, exceptVersion?: string): Promise<{ id: string; version: string } | undefined> {
    const rows = await this.pool.query(
      `select id, version from manent.deploys
       where tenant = $1 and application = $2 and artifact = $3 and environment = $4
         and kind in ('deploy', 'rollback') and status = 'succeeded' and ($5::text is null or version <> $5)
       order by finished_at desc limit 1`,
      [key.tenant, key.application, key.artifact, key.environment, exceptVersion ?? null],
    );
    return rows.rows[0] as { id: string; version: string } | undefined;
  }

  async saveCapabilities(plugin: string, capabilities: Capability[]): Promise<void> {
    await this.pool.query(
      `insert into manent.plugin_capabilities (name, capabilities, updated_at) values ($1, $2, now())
       on conflict (name) do update set capabilities = excluded.capabilities, updated_at = now()`,
      [plugin, JSON.stringify(capabilities)],
    );
  }

  async saveRollout(id: string, rollout: RolloutState, revision: number): Promise<void> {
    await this.q(
      id,
      `update manent.deploys set rollout = $2::jsonb, rollout_revision = $3 where id = $1 and coalesce(rollout_revision, 0) <= $3`,
      [id, JSON.stringify(rollout), revision],
    );
  }

  async recordCommand(id: string, c: CommandRecord): Promise<void> {
    await this.q(
      id,
      `insert into manent.deploy_commands (deploy_id, command, full_promote, sent_by, sent_at, during) values ($1, $2, $3, $4, $5, $6)`,
      [id, c.command, c.full, c.by, c.at, c.during],
    );
  }

  async loadCapabilities(): Promise<Map<string, { capabilities: Capability[]; updated_at: string }>> {
    const rows = await this.pool.query(`select name, capabilities, updated_at from manent.plugin_capabilities`);
    return new Map(
      rows.rows.map((r: { name: string; capabilities: Capability[]; updated_at: unknown }) => [
        r.name,
        { capabilities: r.capabilities, updated_at: iso(r.updated_at)! },
      ]),
    );
  }
}

/** The verification the fetch step recorded in its output, if it recorded one. */
function verificationOf(steps: StepRecord[]): ArtifactVerification[] | null {
  const fetch = steps.find((s) => s.name === "fetch" && s.status === "succeeded");
  if (!fetch?.output?.result) return null;
  try {
    const v = (JSON.parse(fetch.output.result) as { verification?: unknown }).verification;
    return Array.isArray(v) ? (v as ArtifactVerification[]) : null;
  } catch {
    return null;
  }
}

/** A timestamp as json_build_object writes it ("2026-01-02T03:04:05.678901+00:00"), as the API shows them (toISOString). */
function isoText(v: unknown): string | null {
  return v == null ? null : new Date(String(v)).toISOString();
}

function iso(v: unknown): string | null {
  return v instanceof Date ? v.toISOString() : v == null ? null : String(v);
}

function toDeploy(
  r: Record<string, unknown>,
): Omit<DeployRecord, "steps" | "targets" | "request" | "rollout" | "retried_by" | "verification"> {
  return {
    id: r.id as string,
    kind: r.kind as DeployRecord["kind"],
    tenant: r.tenant as string,
    application: r.application as string,
    artifact: r.artifact as string,
    environment: r.environment as string,
    version: r.version as string,
    plugin: (r.plugin as string | null) ?? null,
    status: r.status as DeployStatus,
    error: (r.error as ErrorJSON | null) ?? null,
    submitted_by: (r.submitted_by as string | null) ?? null,
    submitted_by_id: (r.submitted_by_id as string | null) ?? null,
    retry_of: (r.retry_of as string | null) ?? null,
    envconfig: (r.envconfig as EnvconfigOrigin | null) ?? null,
    created_at: iso(r.created_at)!,
    started_at: iso(r.started_at),
    finished_at: iso(r.finished_at),
  };
}

/** $1..$12 of an insert into manent.deploys (id … envconfig), in its column order: one list for both inserts. */
function newDeployValues(d: NewDeploy): unknown[] {
  return [
    d.id,
    d.kind,
    d.tenant,
    d.application,
    d.artifact,
    d.environment,
    d.version,
    JSON.stringify(d.request),
    d.submittedBy ?? null,
    d.submittedById ?? null,
    d.retryOf ?? null,
    d.envconfig ? JSON.stringify(d.envconfig) : null,
  ];
}

/** The most cells an overview shows (application × artifact × environment). */
const overviewLimit = 2000;

/** The drift columns of an overview row (counts come as strings from pg's bigint). */
function overviewDrift(r: Record<string, unknown>): OverviewDrift {
  const [drifted, errors, unknown, targets] = [r.drifted, r.errors, r.unknown, r.targets].map(Number) as [number, number, number, number];
  return {
    state: drifted > 0 ? "drifted" : errors > 0 ? "error" : unknown > 0 ? "unknown" : "in_sync",
    drifted,
    targets,
    checked_at: iso(r.drift_checked_at)!,
  };
}

/** A deploy row as `to_jsonb` gives it (timestamps as JSON strings). */
function overviewDeploy(r: Record<string, unknown>): OverviewDeploy {
  return {
    id: r.id as string,
    kind: r.kind as OverviewDeploy["kind"],
    version: r.version as string,
    status: r.status as DeployStatus,
    by: (r.submitted_by as string | null) ?? null,
    created_at: new Date(r.created_at as string).toISOString(),
    finished_at: r.finished_at ? new Date(r.finished_at as string).toISOString() : null,
  };
}
