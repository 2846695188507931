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
 * drew), so every id it draws is above p. `manent.event_horizon()` reads the sequence's position P,
 * *then* the claims held, and returns the smallest of them: every event up to it is committed
 * (visible to any later statement) or rolled back, and no later transaction draws an id at or
 * below it. Readers read only up to that horizon, in a statement after it. Writers never wait for
 * each other, nor for a reader.
 *
 * Why that order is enough: an id at or below P was drawn before P was read, by a transaction that
 * had claimed before drawing it; so if that transaction is still open, the claims read after P
 * include its own, which is below the id. (A claim read the other way round could miss a
 * transaction that claims and draws in between.) A transaction that read its position but has not
 * locked it yet when the horizon reads the claims draws its ids later, above P. Its claim, once
 * taken, may then hold the next horizon below the last one; a reader never moves back (it keeps
 * the larger of its cursor and the horizon), and what it read below stays final.
 *
 * Not chosen: a transaction id per row read up to `pg_snapshot_xmin(pg_current_snapshot())`. The
 * rows below the xmin are final, but not an id prefix (a later-committing transaction can hold a
 * lower id), so the cursor would have to be (txid, id) instead of the id clients resume from; and
 * the xmin is held back by any transaction of the whole cluster, event writer or not, with no
 * notification when it moves on.
 */
export const eventsChannel = "manent_events";
/** The SQLSTATE of the notice an event-writing commit of a server's own session sends it (events_notify). */
export const eventsWrittenCode = "MN001";
/** What a server's pool sets on each of its connections so that their commits leave the NOTIFY to it. */
export const notifyByServer = "set manent.notify_by = 'server'";
/** Held by the transaction that NOTIFYs, until its commit is over ("mn_ntf"). */
const notifyGate = 0x6d6e5f6e7466;
/** Claims are the keys claimBase + position: "me" in the top 16 bits, the position in the low 48. */
const claimTag = 0x6d65;
const claimBase = `(${claimTag}::bigint << 48)`;
/** The sequence's position: the last id drawn (0 before the first). */
const drawn = `(select case when is_called then last_value else last_value - 1 end from manent.events_id_seq)`;
/**
 * The same for a claim, as an expression plpgsql evaluates without starting a query (a claim only
 * needs a value not above the position): 0 while the sequence says nothing is drawn, also after a
 * `setval(…, false)` that left it further on.
 */
const drawnForClaim = `coalesce(pg_sequence_last_value('manent.events_id_seq'::regclass), 0)`;

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
  // A transaction's claim, before its first id (later calls: nothing); returns its position. The
  // triggers take about 11 claims a no-op deploy, so it is written for plpgsql's fast path: only
  // expressions (a PERFORM, a subquery or an exception block would each start a query or a
  // subtransaction). Nobody takes a claim's key exclusive, so the try-lock takes it.
  `create or replace function manent.event_claim_at() returns bigint
   language plpgsql as $$
   declare
     p bigint;
     done text;
   begin
     p := nullif(current_setting('manent.event_claim', true), '')::bigint;
     if p is not null then
       return p;
     end if;
     p := ${drawnForClaim};
     if not pg_try_advisory_xact_lock_shared(${claimBase} + p) then
       perform pg_advisory_xact_lock_shared(${claimBase} + p);
     end if;
     done := set_config('manent.event_claim', p::text, true);
     return p;
   end $$`,
  // An event's id, drawn after the transaction's claim.
  `create or replace function manent.event_next_id() returns bigint
   language plpgsql as $$
   declare
     p bigint;
   begin
     p := manent.event_claim_at();
     return nextval('manent.events_id_seq');
   end $$`,
  // Kept for the triggers of an older server during a rolling upgrade.
  `create or replace function manent.event_claim() returns void
   language plpgsql as $$
   declare
     p bigint;
   begin
     p := manent.event_claim_at();
   end $$`,
  // The id up to which every event is final (see above). Call it in a statement of its own, and
  // read the events in a later one (a snapshot taken before it may miss what committed meanwhile).
  `create or replace function manent.event_horizon() returns bigint
   language plpgsql as $$
   declare
     p bigint;
     held bigint;
   begin
     -- The position first, then the claims, in two statements (see the top of events-schema.ts).
     p := ${drawn};
     select min(((l.classid::bigint << 32) | l.objid::bigint) - ${claimBase}) into held from pg_locks l
       where l.locktype = 'advisory' and l.objsubid = 1 and (l.classid::bigint >> 16) = ${claimTag}
         and l.database = (select oid from pg_database where datname = current_database());
     return least(p, held);
   end $$`,
  `create or replace function manent.append_event(p_tenant text, p_deploy_id text, p_type text, p_data jsonb) returns bigint
   language plpgsql as $$
   declare
     new_id bigint;
   begin
     new_id := manent.event_next_id();
     insert into manent.events (id, tenant, deploy_id, type, data) values (new_id, p_tenant, p_deploy_id, p_type, coalesce(p_data, '{}'::jsonb));
     return new_id;
   end $$`,
  // The NOTIFY that wakes the hubs, at commit (a deferred trigger), from one committing transaction
  // at a time: Postgres makes every NOTIFYing commit, WAL flush included, wait for the one before it
  // (one lock for the whole cluster, to keep its queue in commit order), so a NOTIFY per
  // event-writing transaction put every deploy's commits in one line. A transaction that finds
  // another one notifying (the try-lock, held until that one's commit is over) leaves it to it:
  // the hubs read after its notification, and while a transaction that skipped still holds the
  // horizon back, read again (pg-event-hub.ts).
  //
  // A server's own sessions (`manent.notify_by` = 'server', set by its pool) do not NOTIFY: each
  // NOTIFY wakes every LISTENing backend of the database and every server's hub, so at saturation
  // a fleet of three spent more on those wakes than on its deploys. They tell their server with a
  // notice instead (sent to that session's client only), and the server NOTIFYs once for all its
  // commits of a moment (events-notifier.ts).
  `create or replace function manent.events_notify() returns trigger language plpgsql as $$
   declare
     done text;
   begin
     if coalesce(current_setting('manent.events_notify', true), '') = '' then
       done := set_config('manent.events_notify', 'done', true);
       -- (A session whose notices would not reach its client NOTIFYs itself.)
       if current_setting('manent.notify_by', true) = 'server'
          and current_setting('client_min_messages') in ('debug5', 'debug4', 'debug3', 'debug2', 'debug1', 'log', 'notice') then
         raise notice using message = 'manent: events written', errcode = '${eventsWrittenCode}';
       elsif pg_try_advisory_xact_lock(${notifyGate}) then
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
       -- A deploy created queued shows its deploy.created itself (created_event, deploy_event_ids below).
       if new.created_event is not null then
         return new;
       end if;
       -- Only what the deploy's row will no longer say later; the rest is read from it (event_data below).
       perform manent.append_event(new.tenant, new.id, 'deploy.created', jsonb_strip_nulls(jsonb_build_object(
         'plugin', new.plugin, 'status', new.status, 'started_at', new.started_at, 'finished_at', new.finished_at))
         || manent.jsonb_key_unless_null('error', new.error));
       return new;
     end if;
     -- deploy.status: the row's (deploy_event_ids below).
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
  // A deploy's row shows up to three of its events (read through manent.event_log, pg-event-hub.ts),
  // as a step's row shows the step's (below): its deploy.created when it was created queued
  // (`created_event`: the event says nothing else the row does not keep), the deploy.status that
  // started it (`start_event`: running, with the row's plugin and started_at, while they stay), and
  // its last deploy.status (`status_event`: the row's status, plugin, error and times, at its
  // finish, else its start). An event the row would no longer show is stored in manent.events, with
  // its id, time and data, by the statement that changes the row.
  `alter table manent.deploys add column if not exists created_event bigint`,
  `alter table manent.deploys add column if not exists start_event bigint`,
  `alter table manent.deploys add column if not exists status_event bigint`,
  `create index if not exists deploys_created_event on manent.deploys (created_event) where created_event is not null`,
  `create index if not exists deploys_start_event on manent.deploys (start_event) where start_event is not null`,
  `create index if not exists deploys_status_event on manent.deploys (status_event) where status_event is not null`,
  `create or replace function manent.deploy_status_data(d manent.deploys) returns jsonb language sql stable as $$
     select jsonb_strip_nulls(jsonb_build_object('status', d.status, 'plugin', d.plugin, 'started_at', d.started_at, 'finished_at', d.finished_at))
       || manent.jsonb_key_unless_null('error', d.error)
   $$`,
  `create or replace function manent.deploy_event_ids() returns trigger language plpgsql as $$
   declare
     status_due boolean;
   begin
     if tg_op = 'INSERT' then
       new.start_event := null;
       new.status_event := null;
       new.created_event := null;
       if new.status = 'queued' and new.plugin is null and new.started_at is null and new.finished_at is null
          and coalesce(new.error, 'null'::jsonb) = 'null'::jsonb then
         new.created_event := manent.event_next_id();
       end if;
       return new;
     end if;
     new.created_event := old.created_event;
     new.start_event := old.start_event;
     new.status_event := old.status_event;
     status_due := new.status is distinct from old.status or new.error is distinct from old.error or new.plugin is distinct from old.plugin;
     if old.start_event is not null and (new.plugin is distinct from old.plugin or new.started_at is distinct from old.started_at
          or new.tenant <> old.tenant or new.id <> old.id) then
       insert into manent.events (id, at, tenant, deploy_id, type, data)
         values (old.start_event, old.started_at, old.tenant, old.id, 'deploy.status',
           jsonb_strip_nulls(jsonb_build_object('status', 'running', 'plugin', old.plugin, 'started_at', old.started_at)));
       new.start_event := null;
     end if;
     if old.status_event is not null and (status_due or new.started_at is distinct from old.started_at
          or new.finished_at is distinct from old.finished_at or new.created_at is distinct from old.created_at
          or new.tenant <> old.tenant or new.id <> old.id) then
       insert into manent.events (id, at, tenant, deploy_id, type, data)
         values (old.status_event, coalesce(old.finished_at, old.started_at, old.created_at), old.tenant, old.id, 'deploy.status',
           manent.deploy_status_data(old));
       new.status_event := null;
     end if;
     if status_due then
       if new.status = 'running' and new.start_event is null and new.started_at is not null and new.finished_at is null
          and coalesce(new.error, 'null'::jsonb) = 'null'::jsonb then
         new.start_event := manent.event_next_id();
       else
         new.status_event := manent.event_next_id();
       end if;
     end if;
     return new;
   end $$`,
  `create or replace trigger deploy_event_ids before insert or update on manent.deploys for each row execute function manent.deploy_event_ids()`,
  `do $$ begin
     if not exists (select 1 from pg_trigger where tgname = 'deploy_events_notify' and tgrelid = 'manent.deploys'::regclass) then
       create constraint trigger deploy_events_notify after insert on manent.deploys deferrable initially deferred
         for each row when (new.created_event is not null) execute function manent.events_notify();
       create constraint trigger deploy_events_notify_update after update on manent.deploys deferrable initially deferred
         for each row when (new.start_event is distinct from old.start_event or new.status_event is distinct from old.status_event)
         execute function manent.events_notify();
     end if;
   end $$`,
  // Steps: every attempt starts and ends with an event, so the history of attempts and their errors
  // is kept. A step's row is its events while it shows them (issue 31, bytes per deploy): its first
  // attempt's start (`started_event`) and its last attempt's end (`ended_event`) are ids drawn from
  // the log's sequence, and readers get them from the row (manent.event_log, pg-event-hub.ts). An
  // event the row will no longer show (an attempt's end when the step starts again, a retry's start)
  // is stored in manent.events first, with its id, time and data, in the same statement: a reader
  // finds each id once, in one place or the other. A retry's start is stored as it happens: the row
  // keeps only its first attempt's start time.
  `alter table manent.deploy_steps add column if not exists started_event bigint`,
  `alter table manent.deploy_steps add column if not exists ended_event bigint`,
  `create index if not exists deploy_steps_started_event on manent.deploy_steps (started_event) where started_event is not null`,
  `create index if not exists deploy_steps_ended_event on manent.deploy_steps (ended_event) where ended_event is not null`,
  // The step's events as its row gives them: stored without the seq (event_data reads it from the
  // row), as the trigger before this stored them.
  `create or replace function manent.step_started_data(s manent.deploy_steps) returns jsonb language sql stable as $$
     select jsonb_strip_nulls(jsonb_build_object('name', s.name, 'attempt', s.attempts, 'started_at', s.started_at))
   $$`,
  `create or replace function manent.step_ended_data(s manent.deploy_steps) returns jsonb language sql stable as $$
     select jsonb_strip_nulls(jsonb_build_object('name', s.name, 'attempt', s.attempts, 'duration_ms', s.duration_ms))
       || manent.jsonb_key_unless_null('error', s.error)
   $$`,
  `create or replace function manent.step_event_ids() returns trigger language plpgsql as $$
   declare
     started_due boolean := false;
     ended_due boolean := false;
     tenant text;
   begin
     if new.status = 'running' then
       started_due := tg_op = 'INSERT' or old.status <> 'running' or old.attempts <> new.attempts;
     else
       ended_due := tg_op = 'INSERT' or old.status is distinct from new.status or old.attempts <> new.attempts;
     end if;
     if tg_op = 'INSERT' then
       new.started_event := null;
       new.ended_event := null;
     else
       new.started_event := old.started_event;
       new.ended_event := old.ended_event;
       -- What the row showed and will no longer show, kept as rows of the log.
       if old.started_event is not null and (started_due or old.name <> new.name or old.attempts <> new.attempts
            or old.started_at is distinct from new.started_at) then
         tenant := (select d.tenant from manent.deploys d where d.id = old.deploy_id);
         insert into manent.events (id, at, tenant, deploy_id, type, data)
           values (old.started_event, coalesce(old.started_at, clock_timestamp()), tenant, old.deploy_id, 'step.started', manent.step_started_data(old));
         new.started_event := null;
       end if;
       -- (A change of its status or attempt is a start or an end due.)
       if old.ended_event is not null and (started_due or ended_due or old.name <> new.name
            or old.duration_ms is distinct from new.duration_ms or old.error is distinct from new.error
            or old.finished_at is distinct from new.finished_at) then
         tenant := coalesce(tenant, (select d.tenant from manent.deploys d where d.id = old.deploy_id));
         insert into manent.events (id, at, tenant, deploy_id, type, data)
           values (old.ended_event, coalesce(old.finished_at, old.started_at, clock_timestamp()), tenant, old.deploy_id,
             'step.' || old.status, manent.step_ended_data(old));
         new.ended_event := null;
       end if;
     end if;
     if started_due then
       new.ended_event := null;
       if new.attempts = 1 and new.started_at is not null then
         new.started_event := manent.event_next_id();
       else
         perform manent.append_event((select d.tenant from manent.deploys d where d.id = new.deploy_id), new.deploy_id, 'step.started',
           manent.step_started_data(new));
       end if;
     elsif ended_due then
       new.ended_event := manent.event_next_id();
     end if;
     return new;
   end $$`,
  `drop trigger if exists step_events on manent.deploy_steps`,
  `drop function if exists manent.step_events()`,
  `create or replace trigger step_event_ids before insert or update on manent.deploy_steps for each row execute function manent.step_event_ids()`,
  // An event in a step's row wakes the hubs as an event row does (events_notify above).
  `do $$ begin
     if not exists (select 1 from pg_trigger where tgname = 'step_events_notify' and tgrelid = 'manent.deploy_steps'::regclass) then
       create constraint trigger step_events_notify after insert on manent.deploy_steps deferrable initially deferred
         for each row when (new.started_event is not null or new.ended_event is not null) execute function manent.events_notify();
       create constraint trigger step_events_notify_update after update on manent.deploy_steps deferrable initially deferred
         for each row when (new.started_event is distinct from old.started_event or new.ended_event is distinct from old.ended_event)
         execute function manent.events_notify();
     end if;
   end $$`,
  // Targets: one event per target whose result changed. As a step's, a target's row is its last
  // event while it shows it (`event_id`, read through manent.event_log); the event it showed is
  // stored in manent.events, with its id, time and data, when the row changes. A deploy of
  // thousands of targets writes no event row for them (it wrote one per target, a third of a no-op
  // deploy's bytes with its indexes).
  `drop trigger if exists target_events on manent.deploy_targets`,
  `drop function if exists manent.target_events()`,
  ...(["insert", "update"] as const).flatMap((op) => [
    `drop trigger if exists target_${op}_events on manent.deploy_targets`,
    `drop function if exists manent.target_${op}_events()`,
  ]),
  `alter table manent.deploy_targets add column if not exists event_id bigint`,
  `create index if not exists deploy_targets_event on manent.deploy_targets (event_id) where event_id is not null`,
  `create or replace function manent.target_event_data(t manent.deploy_targets) returns jsonb language sql stable as $$
     select jsonb_strip_nulls(jsonb_build_object('phase', t.phase, 'host', t.host, 'status', t.status,
         'duration_ms', t.duration_ms, 'error', t.error)) || manent.jsonb_key_unless_null('details', t.details)
   $$`,
  `create or replace function manent.target_event_ids() returns trigger language plpgsql as $$
   begin
     if tg_op = 'INSERT' then
       new.event_id := manent.event_next_id();
       return new;
     end if;
     new.event_id := old.event_id;
     if old.status is distinct from new.status or old.error is distinct from new.error or old.details is distinct from new.details
        or old.duration_ms is distinct from new.duration_ms or old.updated_at is distinct from new.updated_at
        or old.phase <> new.phase or old.host <> new.host or old.deploy_id <> new.deploy_id then
       if old.event_id is not null then
         insert into manent.events (id, at, tenant, deploy_id, type, data)
           values (old.event_id, old.updated_at, (select d.tenant from manent.deploys d where d.id = old.deploy_id), old.deploy_id,
             'target.updated', manent.target_event_data(old));
         new.event_id := null;
       end if;
       -- A new event when the result changed; the same result recorded again is none.
       if old.status is distinct from new.status or old.error is distinct from new.error or old.details is distinct from new.details then
         new.event_id := manent.event_next_id();
       end if;
     end if;
     return new;
   end $$`,
  `create or replace trigger target_event_ids before insert or update on manent.deploy_targets
     for each row execute function manent.target_event_ids()`,
  `do $$ begin
     if not exists (select 1 from pg_trigger where tgname = 'target_events_notify' and tgrelid = 'manent.deploy_targets'::regclass) then
       create constraint trigger target_events_notify after insert on manent.deploy_targets deferrable initially deferred
         for each row when (new.event_id is not null) execute function manent.events_notify();
       create constraint trigger target_events_notify_update after update on manent.deploy_targets deferrable initially deferred
         for each row when (new.event_id is distinct from old.event_id) execute function manent.events_notify();
     end if;
   end $$`,
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
  // A deploy.created as its deploy's row gives it: what the row keeps, and null for what it says
  // only at the deploy's creation (its status, plugin, error and times then), which the stored
  // event (event_data below) or the row's created_event (a deploy created queued) supplies.
  `create or replace function manent.deploy_created_data(d manent.deploys) returns jsonb language sql stable as $$
     select jsonb_build_object(
       'id', d.id, 'kind', d.kind, 'tenant', d.tenant, 'application', d.application, 'artifact', d.artifact,
       'environment', d.environment, 'version', d.version, 'plugin', null, 'status', null,
       'error', null, 'submitted_by', d.submitted_by, 'submitted_by_id', d.submitted_by_id, 'retry_of', d.retry_of, 'envconfig', d.envconfig,
       'created_at', d.created_at, 'started_at', null, 'finished_at', null)
   $$`,
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
           else coalesce((select manent.deploy_created_data(d) from manent.deploys d where d.id = p_deploy_id), '{}'::jsonb) || p_data end
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
