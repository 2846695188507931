import pg from "pg";
import type { Logger } from "../core/contract/index.js";
import type { DeployEvent } from "../core/engine/deploy-events.js";
import { matchesPattern, type ScopePattern } from "../core/identity/index.js";
import { eventsChannel } from "./events-schema.js";
import { scopeCondition } from "./scope-sql.js";

/** Which events a reader wants: one deploy's, or one tenant's ("*" or absent: all tenants). */
export interface EventFilter {
  deployId?: string;
  /** One release's events (its own, not its deploys'). */
  releaseId?: string;
  tenant?: string;
  /** Only events of deploys within these scopes (what the caller may read); absent: all. */
  scopes?: readonly ScopePattern[];
  /**
   * Only events of these types (e.g. `deploy.status` for a reader of deploys' ends); absent: all.
   * A subscriber that names its types (or one deploy) lets the hub read less (see `PgEventHub`).
   */
  types?: readonly string[];
}

/** An event with where its deploy is, so a subscriber's scopes can be matched without a query per event. */
interface PlacedEvent {
  event: DeployEvent;
  application: string | null;
  environment: string | null;
  /** A release's environments (its events are visible to whoever may read one of them); null for a deploy's event. */
  environments: string[] | null;
}

type Listener = (event: DeployEvent) => void;

interface Subscription {
  filter: EventFilter;
  fn: Listener;
  onClose: (() => void) | undefined;
  /** When it subscribed (the hub's count of subscriptions): a read started before it did not ask for what it needs. */
  seq: number;
}

/**
 * The hub's read in one statement (one round trip, one commit, where it took two): the horizon,
 * then the events up to it. A VOLATILE plpgsql function takes a new snapshot for each statement in
 * it (READ COMMITTED), so the events are read in a snapshot taken after the horizon, as a separate
 * statement would. A row with a null id carries the horizon when there is no event to read.
 * Created after the release statements (it reads manent.releases).
 */
export const eventHubStatements = [
  // The whole log as every reader reads it: the rows of manent.events with their data restored
  // (event_data), and the events the rows of deploys, steps and targets still show (events-schema.ts:
  // deploy_event_ids, step_event_ids, target_event_ids). Readers read a range of ids, in order,
  // a page at a time: each part is read in id order through an index on its id, and merged, so a
  // page stops after its rows however far back it starts. For that Postgres must make each part
  // a member of one append (a part with a join or a WHERE of its own is planned apart, read whole
  // and sorted): a step's or target's tenant is a subquery, and the rows that show no event (a
  // null id) are left out once, outside.
  `create or replace view manent.event_log as
   select * from (
     select e.id, e.at, e.tenant, e.deploy_id, e.release_id, e.type, manent.event_data(e.type, e.deploy_id, e.data) as data
       from manent.events e
     union all
     select s.started_event, s.started_at, (select d.tenant from manent.deploys d where d.id = s.deploy_id), s.deploy_id, null::text,
         'step.started',
         jsonb_build_object('name', s.name, 'seq', s.seq, 'attempt', s.attempts, 'started_at', s.started_at)
       from manent.deploy_steps s
     union all
     select s.ended_event, coalesce(s.finished_at, s.started_at), (select d.tenant from manent.deploys d where d.id = s.deploy_id),
         s.deploy_id, null::text, 'step.' || s.status,
         jsonb_build_object('name', s.name, 'seq', s.seq, 'attempt', s.attempts, 'duration_ms', s.duration_ms,
           'error', coalesce(s.error, 'null'::jsonb))
       from manent.deploy_steps s
     union all
     select t.event_id, t.updated_at, (select d.tenant from manent.deploys d where d.id = t.deploy_id), t.deploy_id, null::text,
         'target.updated',
         jsonb_build_object('phase', t.phase, 'host', t.host, 'status', t.status, 'duration_ms', t.duration_ms, 'error', t.error,
           'details', coalesce(t.details, 'null'::jsonb))
       from manent.deploy_targets t
     union all
     select d.created_event, d.created_at, d.tenant, d.id, null::text, 'deploy.created',
         manent.deploy_created_data(d) || '{"status": "queued"}'::jsonb
       from manent.deploys d
     union all
     select d.start_event, d.started_at, d.tenant, d.id, null::text, 'deploy.status',
         jsonb_build_object('status', 'running', 'error', null, 'plugin', d.plugin, 'started_at', d.started_at, 'finished_at', null)
       from manent.deploys d
     union all
     select d.status_event, coalesce(d.finished_at, d.started_at, d.created_at), d.tenant, d.id, null::text, 'deploy.status',
         jsonb_build_object('status', d.status, 'error', coalesce(d.error, 'null'::jsonb), 'plugin', d.plugin, 'started_at', d.started_at,
           'finished_at', d.finished_at)
       from manent.deploys d
   ) log where log.id is not null`,
  // What the hub reads since it reads only what its subscribers want (issue 31): a condition on the
  // events' type and deploy, applied before the joins and event_data, so an event no subscriber
  // wants is neither restored nor sent. A function of its own name: an older server, during a
  // rolling upgrade, creates read_events again as it knew it and calls that one (below), and never
  // this one. p_all: every event (the other arguments unused);
  // otherwise the events of a type in p_types, of a deploy in p_deploys, or of a deploy in
  // p_pair_deploys with a type in p_pair_types.
  `create or replace function manent.read_events_matching(p_after bigint, p_limit integer, p_all boolean, p_types text[],
     p_deploys text[], p_pair_deploys text[], p_pair_types text[])
   returns table (horizon bigint, drawn bigint, id bigint, at timestamptz, tenant text, deploy_id text, release_id text, type text,
                  data jsonb, application text, environment text, environments text[])
   -- One plan for every read (its arguments are parameters of it): Postgres otherwise plans the
   -- event log's seven parts again at each read (about 1 ms; the read itself takes 0.1).
   language plpgsql volatile set plan_cache_mode = force_generic_plan as $$
   #variable_conflict use_column
   declare
     h bigint;
     d bigint;
   begin
     h := manent.event_horizon();
     d := (select case when s.is_called then s.last_value else s.last_value - 1 end from manent.events_id_seq s);
     return query
       select h, d, e.id, e.at, e.tenant, e.deploy_id, e.release_id, e.type, e.data, coalesce(dp.application, r.application),
         dp.environment, r.environments
       from manent.event_log e left join manent.deploys dp on dp.id = e.deploy_id left join manent.releases r on r.id = e.release_id
       where e.id > p_after and e.id <= h
         and (p_all or e.type = any(p_types) or e.deploy_id = any(p_deploys) or (e.type = any(p_pair_types) and e.deploy_id = any(p_pair_deploys)))
       order by e.id limit p_limit;
     if not found then
       return query select h, d, null::bigint, null::timestamptz, null::text, null::text, null::text, null::text, null::jsonb,
         null::text, null::text, null::text[];
     end if;
   end $$`,
  // What an older server's hub calls during a rolling upgrade: every event, through the read above
  // (an older server starting creates it again as it knew it, reading the same rows).
  `create or replace function manent.read_events(p_after bigint, p_limit integer)
   returns table (horizon bigint, drawn bigint, id bigint, at timestamptz, tenant text, deploy_id text, release_id text, type text,
                  data jsonb, application text, environment text, environments text[])
   language sql volatile as $$
     select * from manent.read_events_matching(p_after, p_limit, true, '{}', '{}', '{}', '{}')
   $$`,
];

/**
 * What one read of the hub asks for: the union of its subscribers' needs, each of them every event
 * (`all`), events of some types, of one deploy, or of one deploy and some types (kept as pairs of
 * sets: a superset of the subscribers' pairs when several deploys want different types).
 */
interface ReadNeed {
  all: boolean;
  types: Set<string>;
  deploys: Set<string>;
  pairDeploys: Set<string>;
  pairTypes: Set<string>;
}

/**
 * Past this many deploys a read asks for their types (or for everything) instead: a condition
 * with thousands of ids (a crowd of `?wait=`) would cost each event read more than it saves.
 */
const maxDeploys = 200;
/**
 * Past this many deploys wanting some types only (`?wait=`: one deploy's status events), a read asks
 * for those types of every deploy. Each id is compared with every event read, and a waiter that
 * subscribes while a read runs is not in it, so that read was made again: with 100 waiters a
 * server's read cost 3.4 ms of Postgres where the read by type cost 2.7 (bench/README.md, "Drift looks").
 */
const maxPairDeploys = 16;

const everything = (): ReadNeed => ({ all: true, types: new Set(), deploys: new Set(), pairDeploys: new Set(), pairTypes: new Set() });

/** What a subscriber with `filter` needs read: its types and deploy; any other condition is applied in memory. */
function addNeed(need: ReadNeed, filter: EventFilter): void {
  const { types, deployId } = filter;
  if (types === undefined && deployId === undefined) need.all = true;
  else if (deployId === undefined) for (const t of types!) need.types.add(t);
  else if (types === undefined) need.deploys.add(deployId);
  else {
    need.pairDeploys.add(deployId);
    for (const t of types) need.pairTypes.add(t);
  }
}

/** Whether a read with `need` got every event a subscriber with `filter` wants. */
function covers(need: ReadNeed, filter: EventFilter): boolean {
  if (need.all) return true;
  const { types, deployId } = filter;
  if (types === undefined && deployId === undefined) return false;
  const typesIn = (set: Set<string>) => types !== undefined && types.every((t) => set.has(t));
  if (typesIn(need.types)) return true;
  if (deployId === undefined) return false;
  if (need.deploys.has(deployId)) return true;
  return need.pairDeploys.has(deployId) && typesIn(need.pairTypes);
}

const pageSize = 500;
/**
 * Events kept in memory for streams that resume: the last ones the hub delivered, at most this many
 * and this much JSON (a rollout's events carry its waves' hosts: a few can weigh megabytes).
 */
const defaultRecent = 2_000;
const recentMaxChars = 4 << 20;
/**
 * How long a notification waits for the next ones before the hub reads: a deploy writes its events
 * a few milliseconds apart, and one read for them all is one statement instead of one per event
 * (on every server of the fleet). A subscriber gets an event at most this much later.
 */
const gatherMs = 25;
const recheckMinMs = 100;
const recheckMaxMs = 2_000;
/** While something is subscribed, the longest time between two reads. */
const safetyRecheckMs = 5_000;

/**
 * One server's view of the event log: a dedicated connection LISTENs to `manent_events`; each
 * notification (whichever server's write caused it) makes the hub read the events after the last
 * one it delivered and hand them to its subscribers (SSE streams, `?wait=`). Without writes there
 * are no reads, except while a transaction that claimed ids is open (see below) and, while
 * something is subscribed, one every few seconds (`safetyReadMs`). After a lost connection it
 * reconnects and catches up.
 *
 * Every read stops at the event log's horizon (`manent.event_horizon()`, events-schema.ts): ids
 * commit out of order, and what is below the horizon is final, so a reader past id N never finds a
 * smaller one later. A commit NOTIFYs after its claim is released, so the read it causes gets past
 * it. A transaction that rolls back NOTIFYs nothing, and one committing while another notifies
 * leaves the NOTIFY to that one (events_notify, events-schema.ts), so while the horizon stands
 * below the last drawn id the hub reads again after a delay (100 ms, growing to 2 s while nothing
 * moves). The safety read covers a transaction that skipped its NOTIFY for one whose commit then
 * failed after all (its server or backend killed in the middle of it).
 *
 * A read asks the database only for what the subscribers of the time want (issue 31: in a fleet
 * every server reads every event otherwise): the drift checks and `?wait=` want deploys' status
 * events (and `?wait=` one deploy's), so while no stream or notifier is subscribed the hub reads
 * those only, and the rest is neither restored, sent nor parsed. It reads every event while one
 * subscriber wants them all (a stream, the notifier), and keeps the recent ones in memory only then.
 */
export class PgEventHub {
  private client: pg.Client | undefined;
  private readonly listeners = new Set<Subscription>();
  private subscriptions = 0;
  private lastId = 0;
  /**
   * The events the hub delivered last, oldest first: every event with an id in (recentFrom, lastId].
   * Kept only while the hub reads every event: a read for some subscribers only moves recentFrom up
   * to lastId (what it left out is not in memory, and a stream resuming before it reads the database).
   */
  private recent: PlacedEvent[] = [];
  private recentFrom = 0;
  private recentChars = 0;
  private readonly json = new WeakMap<DeployEvent, string>();
  private reading: Promise<void> | undefined;
  /** A read asked for (a recheck, the safety read) while one was running: the next starts at its end. */
  private again = false;
  /** A notification arrived while a read was running: the next read waits {@link gatherMs} from its end. */
  private notifiedWhileReading = false;
  private closed = false;
  private retryMs = 100;
  private retryTimer: NodeJS.Timeout | undefined;
  private recheckMs = recheckMinMs;
  private recheckTimer: NodeJS.Timeout | undefined;
  private gatherTimer: NodeJS.Timeout | undefined;
  private safetyTimer: NodeJS.Timeout | undefined;
  /** Subscribers that are not in the background (see `subscribe`). */
  private readers = 0;
  private lastReadAt = 0;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    private readonly logger: Logger,
    private readonly recentMax: number,
    private readonly safetyMs: number,
  ) {}

  /**
   * `recent`: how many of the last events to keep for streams that resume (default 2,000);
   * `safetyReadMs`: the longest time between two reads while something is subscribed (default 5 s).
   */
  static async start(
    pool: pg.Pool,
    databaseUrl: string,
    logger: Logger,
    opts: { recent?: number | undefined; safetyReadMs?: number } = {},
  ): Promise<PgEventHub> {
    const hub = new PgEventHub(pool, databaseUrl, logger, opts.recent ?? defaultRecent, opts.safetyReadMs ?? safetyRecheckMs);
    hub.lastId = (await hub.horizon()).horizon;
    hub.recentFrom = hub.lastId;
    await hub.connect();
    return hub;
  }

  /**
   * Where the hub stands: every event up to this id has been handed to the subscribers of the
   * time, and every later one will be handed to those subscribed when it is read. A live-only
   * stream starts here without asking the database.
   */
  get position(): number {
    return this.lastId;
  }

  /**
   * The events after `afterId` that match, oldest first, from memory: up to {@link position},
   * when every event after `afterId` is still kept; undefined when some may have been dropped (read
   * the database). Called in the same tick as {@link subscribe}, the two together miss nothing.
   */
  recentAfter(afterId: number, filter: EventFilter): DeployEvent[] | undefined {
    if (afterId < this.recentFrom) return undefined;
    // The first kept event after afterId (ids increase along the list).
    let lo = 0;
    let hi = this.recent.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.recent[mid]!.event.id <= afterId) lo = mid + 1;
      else hi = mid;
    }
    const out: DeployEvent[] = [];
    for (let i = lo; i < this.recent.length; i++) if (matches(filter, this.recent[i]!)) out.push(this.recent[i]!.event);
    return out;
  }

  /** An event as JSON, made once however many streams send it. */
  toJson(event: DeployEvent): string {
    let text = this.json.get(event);
    if (text === undefined) {
      text = JSON.stringify(event);
      this.json.set(event, text);
    }
    return text;
  }

  /** Events after `afterId` that match, oldest first (at most `limit`), up to the horizon. */
  async read(afterId: number, filter: EventFilter, limit = pageSize): Promise<DeployEvent[]> {
    const { horizon } = await this.horizon();
    return (await this.readPlaced(afterId, horizon, filter, limit)).map((p) => p.event);
  }

  /**
   * The id up to which every event is final, and the last id drawn (above the horizon while a
   * transaction that may still write a lower id is open). Its own statement: the events are read in
   * a later one, whose snapshot has every commit below the horizon.
   */
  private async horizon(): Promise<{ horizon: number; drawn: number }> {
    const r = await this.pool.query<{ horizon: string; drawn: string }>(
      `select manent.event_horizon()::text as horizon,
         (select case when is_called then last_value else last_value - 1 end from manent.events_id_seq)::text as drawn`,
    );
    return { horizon: Number(r.rows[0]!.horizon), drawn: Number(r.rows[0]!.drawn) };
  }

  /**
   * The events after `afterId` up to the horizon that `need` asks for (a page of them), with the
   * horizon and the last id drawn: one statement (read_events_matching).
   */
  private async readNext(afterId: number, need: ReadNeed): Promise<{ horizon: number; drawn: number; events: PlacedEvent[] }> {
    const rows = await this.pool.query(
      `select r.horizon, r.drawn, r.id, r.at, r.tenant, r.deploy_id, r.release_id, r.type, r.data,
         r.application, r.environment, r.environments
       from manent.read_events_matching($1, $2, $3, $4, $5, $6, $7) r`,
      [afterId, pageSize, need.all, [...need.types], [...need.deploys], [...need.pairDeploys], [...need.pairTypes]],
    );
    const first = rows.rows[0] as { horizon: string; drawn: string } | undefined;
    const events = rows.rows
      .filter((r: Record<string, unknown>) => r.id !== null)
      .map((r: Record<string, unknown>) => ({
        event: toEvent(r),
        application: (r.application as string | null) ?? null,
        environment: (r.environment as string | null) ?? null,
        environments: (r.environments as string[] | null) ?? null,
      }));
    return { horizon: Number(first?.horizon ?? afterId), drawn: Number(first?.drawn ?? afterId), events };
  }

  private async readPlaced(afterId: number, upTo: number, filter: EventFilter, limit = pageSize): Promise<PlacedEvent[]> {
    if (upTo <= afterId) return [];
    const where = ["e.id > $1", "e.id <= $2"];
    const args: unknown[] = [afterId, upTo];
    if (filter.deployId !== undefined) where.push(`e.deploy_id = $${args.push(filter.deployId)}`);
    if (filter.releaseId !== undefined) where.push(`e.release_id = $${args.push(filter.releaseId)}`);
    if (filter.tenant !== undefined && filter.tenant !== "*") where.push(`e.tenant = $${args.push(filter.tenant)}`);
    if (filter.types !== undefined) where.push(`e.type = any($${args.push([...filter.types])})`);
    if (filter.scopes) {
      const deploy = scopeCondition(filter.scopes, args, {
        tenant: "e.tenant",
        application: "d.application",
        environment: "d.environment",
      });
      const release = scopeCondition(filter.scopes, args, { tenant: "e.tenant", application: "r.application", environment: "re.env" });
      if (deploy !== undefined || release !== undefined) {
        where.push(
          `(case when e.release_id is null then ${deploy ?? "true"}
             else exists (select 1 from unnest(r.environments) as re(env) where ${release ?? "true"}) end)`,
        );
      }
    }
    const rows = await this.pool.query(
      `select e.id, e.at, e.tenant, e.deploy_id, e.release_id, e.type, e.data, coalesce(d.application, r.application) as application,
         d.environment, r.environments
       from manent.event_log e left join manent.deploys d on d.id = e.deploy_id left join manent.releases r on r.id = e.release_id
       where ${where.join(" and ")} order by e.id limit $${args.push(limit)}`,
      args,
    );
    return rows.rows.map((r: Record<string, unknown>) => ({
      event: toEvent(r),
      application: (r.application as string | null) ?? null,
      environment: (r.environment as string | null) ?? null,
      environments: (r.environments as string[] | null) ?? null,
    }));
  }

  /**
   * Calls `fn` with every new event that matches, until the returned function is called;
   * `onClose` when the hub closes (the server stops), so a stream can end.
   */
  subscribe(filter: EventFilter, fn: Listener, onClose?: () => void, opts: { background?: boolean } = {}): () => void {
    const entry: Subscription = { filter, fn, onClose, seq: ++this.subscriptions };
    this.listeners.add(entry);
    // The server's own followers (drift, notifications) look at the log on their own too: only a
    // reader waiting for events (a stream, a `?wait=`) keeps the safety read going.
    if (opts.background) return () => this.listeners.delete(entry);
    this.readers++;
    this.scheduleSafetyRead();
    let subscribed = true;
    return () => {
      if (!subscribed) return;
      subscribed = false;
      this.readers--;
      this.listeners.delete(entry);
    };
  }

  /** A read when none happened for `safetyReadMs`, as long as something is subscribed. */
  private scheduleSafetyRead(): void {
    if (this.safetyTimer || this.closed) return;
    this.safetyTimer = setTimeout(() => {
      this.safetyTimer = undefined;
      if (this.readers === 0 || this.closed) return;
      if (Date.now() - this.lastReadAt >= this.safetyMs) this.fetchNew();
      this.scheduleSafetyRead();
    }, this.safetyMs);
    this.safetyTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.recheckTimer);
    clearTimeout(this.gatherTimer);
    clearTimeout(this.safetyTimer);
    for (const l of this.listeners) l.onClose?.();
    this.listeners.clear();
    await this.reading?.catch(() => undefined);
    await this.client?.end().catch(() => undefined);
  }

  /**
   * This server committed events (events-notifier.ts): read as for a notification, without waiting
   * for the NOTIFY the server sends the others at the end of its window.
   */
  written(): void {
    this.gather();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on("notification", () => this.gather());
    client.on("error", (err) => {
      this.logger.warn("event listener connection lost; reconnecting", { error: err.message });
      this.reconnect(client);
    });
    client.on("end", () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${eventsChannel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
    this.retryMs = 100;
  }

  private reconnect(lost: pg.Client): void {
    if (this.closed || this.client !== lost) return;
    this.client = undefined;
    void lost.end().catch(() => undefined);
    this.scheduleConnect();
  }

  /** A back-off before each try to listen again; once listening, it reads what was written meanwhile. */
  private scheduleConnect(): void {
    this.retryTimer = setTimeout(() => {
      this.connect().then(
        () => this.fetchNew(),
        (err: unknown) => {
          this.logger.warn("event listener cannot reconnect", { error: String(err) });
          this.retryMs = Math.min(this.retryMs * 2, 5000);
          if (!this.closed) this.scheduleConnect();
        },
      );
    }, this.retryMs);
    this.retryTimer.unref();
  }

  /**
   * A notification: read after {@link gatherMs}, with whatever else was notified meanwhile. One
   * arriving during a read waits as long from that read's end: a busy hub reads every gatherMs,
   * not back to back (it re-read at once, and every server of a fleet read at the rate of the
   * fleet's notifications).
   */
  private gather(): void {
    if (this.reading) {
      this.notifiedWhileReading = true;
      return;
    }
    if (this.gatherTimer || this.closed) return;
    this.gatherTimer = setTimeout(() => this.fetchNew(), gatherMs);
  }

  /** Reads what is new; a notification arriving during the read makes it read again {@link gatherMs} after (gather). */
  private fetchNew(): void {
    clearTimeout(this.gatherTimer);
    this.gatherTimer = undefined;
    if (this.reading) {
      this.again = true;
      return;
    }
    clearTimeout(this.recheckTimer);
    this.recheckTimer = undefined;
    this.lastReadAt = Date.now();
    // What was notified until now, this read covers (its horizon is taken after).
    this.notifiedWhileReading = false;
    this.reading = (async () => {
      let held = false;
      const from = this.lastId;
      do {
        this.again = false;
        let horizon: number;
        let wide: boolean;
        let missed = 0;
        for (;;) {
          // What the subscribers of now need; one that subscribes while the statement runs may need
          // more: then the page is read again, for it too, before anyone gets any of it (each
          // subscriber gets every event it wants after `position` at its subscription, in order).
          // A second miss in a row reads everything, which covers whoever came.
          const need = missed >= 2 ? everything() : this.need();
          const seq = this.subscriptions;
          const page = await this.readNext(this.lastId, need);
          if (!this.coversNewcomers(need, seq)) {
            missed++;
            continue;
          }
          missed = 0;
          horizon = page.horizon;
          held = page.horizon < page.drawn;
          wide = need.all;
          const events = page.events;
          for (const e of events) this.deliver(e);
          if (events.length > 0) this.lastId = events[events.length - 1]!.event.id;
          if (wide) this.keep(events);
          else this.forget();
          if (events.length < pageSize) break;
        }
        // Nothing up to the horizon is left out: the next read starts there (ids of rolled-back
        // transactions below it are never written).
        this.lastId = Math.max(this.lastId, horizon);
        if (!wide) this.forget();
      } while (this.again && !this.closed);
      if (this.lastId > from) this.recheckMs = recheckMinMs;
      this.scheduleRecheck(held);
    })()
      .catch((err: unknown) => this.logger.warn("cannot read new events", { error: String(err) }))
      .finally(() => {
        this.reading = undefined;
        if (this.closed) return;
        if (this.again) this.fetchNew();
        else if (this.notifiedWhileReading) this.gather();
      });
  }

  /** While a claim holds the horizon back, reads again later in case its transaction rolls back (no NOTIFY then). */
  private scheduleRecheck(held: boolean): void {
    if (!held || this.closed) {
      this.recheckMs = recheckMinMs;
      return;
    }
    if (this.recheckTimer || this.again) return;
    this.recheckTimer = setTimeout(() => {
      this.recheckTimer = undefined;
      this.fetchNew();
    }, this.recheckMs);
    this.recheckTimer.unref();
    this.recheckMs = Math.min(this.recheckMs * 2, recheckMaxMs);
  }

  /** What the current subscribers need read: everything when one of them wants every event (or nothing when none is subscribed). */
  private need(): ReadNeed {
    const need: ReadNeed = { all: false, types: new Set(), deploys: new Set(), pairDeploys: new Set(), pairTypes: new Set() };
    for (const l of this.listeners) {
      addNeed(need, l.filter);
      if (need.all) break;
    }
    if (need.deploys.size > maxDeploys) return everything();
    if (need.pairDeploys.size > maxPairDeploys) {
      for (const t of need.pairTypes) need.types.add(t);
      need.pairDeploys.clear();
      need.pairTypes.clear();
    }
    return need;
  }

  /** Whether a read with `need`, started when `seq` subscriptions had been made, has what each later subscriber wants. */
  private coversNewcomers(need: ReadNeed, seq: number): boolean {
    if (need.all || this.subscriptions === seq) return true;
    for (const l of this.listeners) if (l.seq > seq && !covers(need, l.filter)) return false;
    return true;
  }

  /** After a read of some events only: none is kept, and a stream resuming before lastId reads the database. */
  private forget(): void {
    this.recent = [];
    this.recentChars = 0;
    this.recentFrom = this.lastId;
  }

  /** Keeps the events just delivered (read in id order, after lastId), dropping the oldest beyond the bound. */
  private keep(events: PlacedEvent[]): void {
    for (const e of events) {
      this.recent.push(e);
      this.recentChars += this.toJson(e.event).length;
    }
    let drop = 0;
    while (drop < this.recent.length && (this.recent.length - drop > this.recentMax || this.recentChars > recentMaxChars))
      this.recentChars -= this.toJson(this.recent[drop++]!.event).length;
    if (drop > 0) {
      this.recentFrom = this.recent[drop - 1]!.event.id;
      this.recent = this.recent.slice(drop);
    }
  }

  private deliver(placed: PlacedEvent): void {
    const e = placed.event;
    for (const { filter, fn } of this.listeners) {
      if (!matches(filter, placed)) continue;
      try {
        fn(e);
      } catch (err) {
        this.logger.warn("event subscriber failed", { error: String(err) });
      }
    }
  }
}

/** Whether a reader with `filter` gets the event: the condition of {@link PgEventHub.read}, in memory. */
function matches(filter: EventFilter, { event: e, application, environment, environments }: PlacedEvent): boolean {
  if (filter.deployId !== undefined && filter.deployId !== e.deploy_id) return false;
  if (filter.releaseId !== undefined && filter.releaseId !== e.release_id) return false;
  if (filter.types !== undefined && !filter.types.includes(e.type)) return false;
  if (filter.tenant !== undefined && filter.tenant !== "*" && filter.tenant !== e.tenant) return false;
  const visible = (s: ScopePattern) =>
    environments ? environments.some((env) => inScope(s, e.tenant, application, env)) : inScope(s, e.tenant, application, environment);
  return !filter.scopes || filter.scopes.some(visible);
}

/** The SQL condition of `scopeCondition`, in memory: a pattern of `*` matches anything, a missing value only `*`. */
function inScope(scope: ScopePattern, tenant: string, application: string | null, environment: string | null): boolean {
  const field = (pattern: string, value: string | null) => pattern === "*" || (value !== null && matchesPattern(pattern, value));
  return field(scope.tenant, tenant) && field(scope.application, application) && field(scope.environment, environment);
}

function toEvent(r: Record<string, unknown>): DeployEvent {
  return {
    id: Number(r.id),
    at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
    tenant: r.tenant as string,
    deploy_id: (r.deploy_id as string | null) ?? null,
    ...(r.release_id ? { release_id: r.release_id as string } : {}),
    type: r.type as string,
    data: (r.data as Record<string, unknown>) ?? {},
  };
}
