/**
 * The event log behind the live streams (SSE, `manent deploy`, the web UI): one row per change of
 * a deploy, with a durable sequence (`id`) that clients resume from (`Last-Event-ID`).
 *
 * Events are written by triggers on the deploy tables, so every write of the store (and of any
 * code that writes these tables) produces its event in the same transaction, and by
 * `manent.append_event(tenant, deploy_id, type, data)` for events that no table write carries.
 * An event-writing commit NOTIFYs `manent_events` (unless another one is notifying at that moment,
 * see `events_notify` below); every server LISTENs (pg-event-hub.ts), so an event written through
 * one server reaches the streams of all of them.
 *
 * Readers resume after an id, so they must never find a committed event with an id below one they
 * have read. Ids are drawn from a sequence at insert, but transactions commit in any order: the
 * transaction holding id 5 may commit after the one holding id 6. Rather than making appends take
 * one lock in turn until commit (which serialised every event-writing transaction and its WAL
 * flush across the fleet), each transaction, before its first id, *claims* the sequence's position
 * p: a transaction-scoped shared advisory lock on the key `claimBase + p` (visible to all in
 * pg_locks, released by commit or rollback, and by a savepoint's rollback together with the ids it
 * drew), so every id it draws is above p. Claiming takes the key `claimGate` shared for an instant;
 * `manent.event_horizon()` takes it exclusive for an instant and returns the smallest of the
 * sequence's position and every claim held: every event up to it is committed (visible to any
 * later statement) or rolled back, and no later transaction draws an id at or below it. Readers
 * read only up to that horizon, in a statement after it. Writers never wait for each other.
 *
 * Not chosen: a transaction id per row read up to `pg_snapshot_xmin(pg_current_snapshot())`. The
 * rows below the xmin are final, but not an id prefix (a later-committing transaction can hold a
 * lower id), so the cursor would have to be (txid, id) instead of the id clients resume from; and
 * the xmin is held back by any transaction of the whole cluster, event writer or not, with no
 * notification when it moves on.
 */
export const eventsChannel = "manent_events";
/** Taken shared by a claim, exclusive by the horizon ("mn_evt"). */
const claimGate = 0x6d6e5f657674;
/** Held by the transaction that NOTIFYs, until its commit is over ("mn_ntf"). */
const notifyGate = 0x6d6e5f6e7466;
/** Claims are the keys claimBase + position: "me" in the top 16 bits, the position in the low 48. */
const claimTag = 0x6d65;
const claimBase = `(${claimTag}::bigint << 48)`;
/** The sequence's position: the last id drawn (0 before the first). */
const drawn = `(select case when is_called then last_value else last_value - 1 end from manent.events_id_seq)`;

export const eventStatements = [
  `create table if not exists manent.events (
     id bigserial primary key,
     at timestamptz not null default clock_timestamp(),
     tenant text not null,
     deploy_id text,
     type text not null,
     data jsonb not null default '{}'::jsonb
   )`,
  `create index if not exists events_deploy on manent.events (deploy_id, id)`,
  `create index if not exists events_tenant on manent.events (tenant, id)`,
  // A transaction's claim, before its first id (later calls: nothing). The gate is a session lock,
  // released before the function returns, also when it fails (a cancel included).
  `create or replace function manent.event_claim() returns void
   language plpgsql as $$
   declare
     p bigint;
   begin
     if coalesce(current_setting('manent.event_claim', true), '') <> '' then
       return;
     end if;
     begin
       perform pg_advisory_lock_shared(${claimGate});
       p := ${drawn};
       perform pg_advisory_xact_lock_shared(${claimBase} + p);
       perform pg_advisory_unlock_shared(${claimGate});
     exception when query_canceled or others then
       perform pg_advisory_unlock_shared(${claimGate});
       raise;
     end;
     perform set_config('manent.event_claim', p::text, true);
   end $$`,
  // The id up to which every event is final (see above). Call it in a statement of its own, and
  // read the events in a later one (a snapshot taken before it may miss what committed meanwhile).
  `create or replace function manent.event_horizon() returns bigint
   language plpgsql as $$
   declare
     p bigint;
     held bigint;
   begin
     begin
       perform pg_advisory_lock(${claimGate});
       p := ${drawn};
       select min(((l.classid::bigint << 32) | l.objid::bigint) - ${claimBase}) into held from pg_locks l
         where l.locktype = 'advisory' and l.objsubid = 1 and (l.classid::bigint >> 16) = ${claimTag}
           and l.database = (select oid from pg_database where datname = current_database());
       perform pg_advisory_unlock(${claimGate});
     exception when query_canceled or others then
       perform pg_advisory_unlock(${claimGate});
       raise;
     end;
     return least(p, held);
   end $$`,
  `create or replace function manent.append_event(p_tenant text, p_deploy_id text, p_type text, p_data jsonb) returns bigint
   language plpgsql as $$
   declare
     new_id bigint;
   begin
     perform manent.event_claim();
     insert into manent.events (tenant, deploy_id, type, data) values (p_tenant, p_deploy_id, p_type, coalesce(p_data, '{}'::jsonb))
       returning id into new_id;
     return new_id;
   end $$`,
  // The NOTIFY that wakes the hubs, at commit (a deferred trigger), from one committing transaction
  // at a time: Postgres makes every NOTIFYing commit, WAL flush included, wait for the one before it
  // (one lock for the whole cluster, to keep its queue in commit order), so a NOTIFY per
  // event-writing transaction put every deploy's commits in one line. A transaction that finds
  // another one notifying (the try-lock, held until that one's commit is over) leaves it to it:
  // the hubs read after its notification, and while a transaction that skipped still holds the
  // horizon back, read again (pg-event-hub.ts).
  `create or replace function manent.events_notify() returns trigger language plpgsql as $$
   begin
     if coalesce(current_setting('manent.events_notify', true), '') = '' then
       perform set_config('manent.events_notify', 'done', true);
       if pg_try_advisory_xact_lock(${notifyGate}) then
         perform pg_notify('${eventsChannel}', '');
       end if;
     end if;
     return null;
   end $$`,
  `do $$ begin
     if not exists (select 1 from pg_trigger where tgname = 'events_notify' and tgrelid = 'manent.events'::regclass) then
       create constraint trigger events_notify after insert on manent.events deferrable initially deferred
         for each row execute function manent.events_notify();
     end if;
   end $$`,
  // An object without its keys whose value is null (only at the top: jsonb_strip_nulls would also
  // strip them inside an error or a target's details, which readers must get as written). Kept for
  // the triggers of an older server during a rolling upgrade; this version's triggers do not call
  // it: a SQL function with a subquery is planned again at each statement that calls it, about
  // 0.1 ms of Postgres's CPU per event (bench/README, "The events' triggers").
  `create or replace function manent.jsonb_without_nulls(p jsonb) returns jsonb language sql immutable as $$
     select p - coalesce((select array_agg(k) from jsonb_each(p) as e(k, v) where v = 'null'::jsonb), '{}'::text[])
   $$`,
  // The triggers' payloads without null keys, as jsonb_without_nulls gives them, in expressions
  // Postgres inlines: jsonb_strip_nulls for the scalar columns (nothing nested to keep), and each
  // jsonb column (an error, a target's details: nulls inside stay) through this, {} when null.
  // Stable, not immutable: jsonb_build_object is stable, and Postgres inlines a function only
  // when its body is no more volatile than it says (immutable, it was called, not inlined).
  `create or replace function manent.jsonb_key_unless_null(p_key text, p_value jsonb) returns jsonb language sql stable as $$
     select case when p_value is null or p_value = 'null'::jsonb then '{}'::jsonb else jsonb_build_object(p_key, p_value) end
   $$`,
  // deploys: created, status changes, and the rollout picture (waves, canary, analysis, waits).
  `create or replace function manent.deploy_events() returns trigger language plpgsql as $$
   declare
     old_rollout jsonb;
     new_rollout jsonb;
   begin
     if tg_op = 'INSERT' then
       -- Only what the deploy's row will no longer say later; the rest is read from it (event_data below).
       perform manent.append_event(new.tenant, new.id, 'deploy.created', jsonb_strip_nulls(jsonb_build_object(
         'plugin', new.plugin, 'status', new.status, 'started_at', new.started_at, 'finished_at', new.finished_at))
         || manent.jsonb_key_unless_null('error', new.error));
       return new;
     end if;
     if new.status is distinct from old.status or new.error is distinct from old.error or new.plugin is distinct from old.plugin then
       perform manent.append_event(new.tenant, new.id, 'deploy.status', jsonb_strip_nulls(jsonb_build_object(
         'status', new.status, 'plugin', new.plugin, 'started_at', new.started_at, 'finished_at', new.finished_at))
         || manent.jsonb_key_unless_null('error', new.error));
     end if;
     -- What a queued deploy waits for (a deploy window). A null column is read as JSON null, as the
     -- row's to_jsonb gave it before: the column is read directly, without converting the whole
     -- row (its request, and a rollout of thousands of hosts) on every update of the deploy.
     if coalesce(new.waiting, 'null') is distinct from coalesce(old.waiting, 'null') then
       perform manent.append_event(new.tenant, new.id, 'deploy.waiting', jsonb_build_object('waiting', coalesce(new.waiting, 'null')));
     end if;
     -- The rollout state (a jsonb column, when the deploy has waves or a canary).
     old_rollout := coalesce(old.rollout, 'null');
     new_rollout := coalesce(new.rollout, 'null');
     if jsonb_typeof(new_rollout) = 'object' and new_rollout is distinct from old_rollout then
       if (new_rollout -> 'current_wave') is distinct from (old_rollout -> 'current_wave')
          or (new_rollout -> 'waves') is distinct from (old_rollout -> 'waves') then
         perform manent.append_event(new.tenant, new.id, 'wave.moved',
           jsonb_build_object('current_wave', new_rollout -> 'current_wave', 'waves', new_rollout -> 'waves'));
       end if;
       if (new_rollout -> 'canary') is distinct from (old_rollout -> 'canary') then
         perform manent.append_event(new.tenant, new.id, 'canary.moved', jsonb_build_object('canary', new_rollout -> 'canary'));
       end if;
       if jsonb_typeof(new_rollout -> 'measurements') = 'array'
          and jsonb_array_length(new_rollout -> 'measurements') > coalesce(jsonb_array_length(case when jsonb_typeof(old_rollout -> 'measurements') = 'array' then old_rollout -> 'measurements' end), 0) then
         perform manent.append_event(new.tenant, new.id, 'analysis.measured', jsonb_build_object('measurements',
           (select coalesce(jsonb_agg(m order by i), '[]'::jsonb) from jsonb_array_elements(new_rollout -> 'measurements') with ordinality as e(m, i)
             where i > coalesce(jsonb_array_length(case when jsonb_typeof(old_rollout -> 'measurements') = 'array' then old_rollout -> 'measurements' end), 0))));
       end if;
       if (new_rollout -> 'waiting') is distinct from (old_rollout -> 'waiting') then
         perform manent.append_event(new.tenant, new.id,
           case when jsonb_typeof(new_rollout -> 'waiting') = 'object' then 'gate.waiting' else 'gate.passed' end,
           jsonb_build_object('waiting', new_rollout -> 'waiting', 'previous', old_rollout -> 'waiting'));
       end if;
       perform manent.append_event(new.tenant, new.id, 'rollout.updated', jsonb_build_object('rollout', new_rollout));
     end if;
     return new;
   end $$`,
  `create or replace trigger deploy_events after insert or update on manent.deploys for each row execute function manent.deploy_events()`,
  // Steps: every attempt starts and ends with an event, so the history of attempts and their errors is kept.
  // Without the step's seq, which its row keeps and never changes (event_data below reads it there).
  `create or replace function manent.step_events() returns trigger language plpgsql as $$
   begin
     if new.status = 'running' then
       if tg_op = 'INSERT' or old.status <> 'running' or old.attempts <> new.attempts then
         perform manent.append_event((select tenant from manent.deploys where id = new.deploy_id), new.deploy_id, 'step.started',
           jsonb_strip_nulls(jsonb_build_object('name', new.name, 'attempt', new.attempts, 'started_at', new.started_at)));
       end if;
     elsif tg_op = 'INSERT' or old.status is distinct from new.status or old.attempts <> new.attempts then
       perform manent.append_event((select tenant from manent.deploys where id = new.deploy_id), new.deploy_id, 'step.' || new.status,
         jsonb_strip_nulls(jsonb_build_object('name', new.name, 'attempt', new.attempts, 'duration_ms', new.duration_ms))
           || manent.jsonb_key_unless_null('error', new.error));
     end if;
     return new;
   end $$`,
  `create or replace trigger step_events after insert or update on manent.deploy_steps for each row execute function manent.step_events()`,
  // Targets: one event per target whose result changed, written per statement (a batch of results
  // is one statement, see engine/target-recorder.ts): one claim and one insert for the whole batch
  // instead of one each per row. Insert and update need their own trigger and function
  // (a trigger with transition tables has one event; a function reads only the tables it has).
  `drop trigger if exists target_events on manent.deploy_targets`,
  `drop function if exists manent.target_events()`,
  ...(["insert", "update"] as const).map((op) => {
    const changed = `from new_rows n join manent.deploys d on d.id = n.deploy_id
       ${
         op === "update"
           ? `where not exists (select 1 from old_rows o where o.deploy_id = n.deploy_id and o.phase = n.phase and o.host = n.host
           and o.status is not distinct from n.status and o.error is not distinct from n.error and o.details is not distinct from n.details)`
           : ""
       }`;
    // A claim only when there is an event to write: a claim without one would hold the streams back
    // until the commit with no NOTIFY to tell them it is over.
    return `create or replace function manent.target_${op}_events() returns trigger language plpgsql as $$
   begin
     if not exists (select 1 ${changed}) then
       return null;
     end if;
     perform manent.event_claim();
     insert into manent.events (tenant, deploy_id, type, data)
     select d.tenant, n.deploy_id, 'target.updated', jsonb_strip_nulls(jsonb_build_object('phase', n.phase, 'host', n.host, 'status', n.status,
         'duration_ms', n.duration_ms, 'error', n.error)) || manent.jsonb_key_unless_null('details', n.details)
     ${changed}
     order by n.updated_at, n.host;
     return null;
   end $$`;
  }),
  ...(["insert", "update"] as const).map(
    (op) => `create or replace trigger target_${op}_events after ${op} on manent.deploy_targets
     referencing new table as new_rows${op === "update" ? " old table as old_rows" : ""}
     for each statement execute function manent.target_${op}_events()`,
  ),
  // Operator commands on a rollout (approve, promote, abort), when the table exists.
  `create or replace function manent.command_events() returns trigger language plpgsql as $$
   declare
     c jsonb := to_jsonb(new);
   begin
     perform manent.append_event((select tenant from manent.deploys where id = new.deploy_id), new.deploy_id,
       case c ->> 'command' when 'approve' then 'gate.approved' when 'promote' then 'canary.promoted' when 'abort' then 'rollout.aborted'
         else 'command.' || coalesce(c ->> 'command', 'unknown') end,
       c - 'deploy_id');
     return new;
   end $$`,
  `do $$ begin
     if to_regclass('manent.deploy_commands') is not null then
       create or replace trigger command_events after insert on manent.deploy_commands for each row execute function manent.command_events();
     end if;
   end $$`,
  // What every reader of the log gets as an event's data (the hub's reads, pg-event-hub.ts, and the
  // notifications' outbox, pg-notification-store.ts): the data as stored, with what the triggers
  // above leave out put back. They store no null key (a reader gets it as null), and
  // \`deploy.created\` stores only what the deploy's row no longer says once the deploy moves on
  // (status, plugin, error, started_at, finished_at), and \`step.*\` without the step's \`seq\`; the rest
  // is the deploy's or the step's row's own, which never changes (an event read below has its rows:
  // retention deletes a deploy's events before the deploy and, with it, its steps). A row
  // written in the full shape (before this) has every key: \`||\` keeps the stored value of each.
  // Each type's keys below are its whole \`data\` (test/docs/event-types.test.ts reads them).
  `create or replace function manent.event_data(p_type text, p_deploy_id text, p_data jsonb) returns jsonb language sql stable as $$
     select case p_type
       when 'deploy.created' then
         case when p_data ? 'id' then p_data
           else coalesce((select jsonb_build_object(
             'id', d.id, 'kind', d.kind, 'tenant', d.tenant, 'application', d.application, 'artifact', d.artifact,
             'environment', d.environment, 'version', d.version, 'plugin', null, 'status', null,
             'error', null, 'submitted_by', d.submitted_by, 'submitted_by_id', d.submitted_by_id, 'retry_of', d.retry_of, 'envconfig', d.envconfig, 'created_at', d.created_at,
             'started_at', null, 'finished_at', null) from manent.deploys d where d.id = p_deploy_id), '{}'::jsonb) || p_data end
       when 'deploy.status' then jsonb_build_object('status', null, 'error', null, 'plugin', null, 'started_at', null, 'finished_at', null) || p_data
       when 'step.started' then jsonb_build_object('name', null, 'seq', step.seq, 'attempt', null, 'started_at', null) || p_data
       when 'target.updated' then
         jsonb_build_object('phase', null, 'host', null, 'status', null, 'duration_ms', null, 'error', null, 'details', null) || p_data
       else case when p_type like 'step.%'
         then jsonb_build_object('name', null, 'seq', step.seq, 'attempt', null, 'duration_ms', null, 'error', null) || p_data
         else p_data end
     end
     -- A step event's seq, read from its step's row when the event was stored without it.
     from (select case when p_type like 'step.%' and not p_data ? 'seq'
             then (select s.seq from manent.deploy_steps s where s.deploy_id = p_deploy_id and s.name = p_data ->> 'name') end as seq) step
   $$`,
];
