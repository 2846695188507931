import type pg from "pg";
import type { NotificationChannel } from "../core/config/notifications-config.js";
import type { NotificationFacts, SourceEvent } from "../core/notifications/notification-source.js";
import type { Delivery, DeliveryOutcome, NotificationStore, PlannedDelivery } from "../core/notifications/notifier.js";

/** What a delivery's end writes on the event log (under its deploy or release), documented in docs/reference/events.md. */
export const notificationEvents = {
  delivered: { type: "notification.delivered", data: ["channel", "channel_type", "event", "attempts"] },
  failed: { type: "notification.failed", data: ["channel", "channel_type", "event", "attempts", "error"] },
} as const;

/** The event types a notification can come from: the rest of the log is skipped by the read. */
const sourceTypes = ["deploy.status", "gate.waiting", "drift.changed", "release.created", "release.status", "release.updated"];

/**
 * The outbox: one row per notification and channel (never the channel's URL or password: only
 * its name), and the event log's position up to which deliveries were planned. Run after the
 * events and release statements (it reads manent.events and manent.releases).
 */
export const notificationStatements = [
  `create table if not exists manent.notification_cursor (
     one boolean primary key default true check (one),
     last_event_id bigint not null
   )`,
  `create table if not exists manent.notifications (
     id bigserial primary key,
     key text not null,
     channel text not null,
     tenant text not null,
     deploy_id text,
     release_id text,
     event text not null,
     facts jsonb not null,
     status text not null default 'pending',
     attempts integer not null default 0,
     next_attempt_at timestamptz not null default now(),
     lease_until timestamptz,
     last_error text,
     created_at timestamptz not null default now(),
     finished_at timestamptz,
     unique (key, channel)
   )`,
  `create index if not exists notifications_pending on manent.notifications (next_attempt_at) where status = 'pending'`,
];

interface Row {
  id: string;
  key: string;
  channel: string;
  facts: NotificationFacts;
  attempts: number;
}

export class PgNotificationStore implements NotificationStore {
  constructor(private readonly pool: pg.Pool) {}

  async pump(plan: (e: SourceEvent) => PlannedDelivery[], limit: number): Promise<number> {
    const client = await this.pool.connect();
    try {
      // The horizon in a statement of its own, the events read in a later one (see events-schema.ts).
      const horizon = Number((await client.query<{ h: string }>("select manent.event_horizon()::text as h")).rows[0]!.h);
      // Nothing new: answered by a read, without the row lock below (a lock takes a transaction id and writes).
      const seen = (await client.query<{ id: string }>("select last_event_id::text as id from manent.notification_cursor")).rows[0];
      if (seen && horizon <= Number(seen.id)) return 0;
      await client.query("begin");
      // A new outbox starts at the log's present: what happened before notifications existed is not sent.
      await client.query("insert into manent.notification_cursor (one, last_event_id) values (true, $1) on conflict do nothing", [horizon]);
      // Held until commit: one server at a time plans, so an event is planned once.
      const after = Number(
        (await client.query<{ id: string }>("select last_event_id::text as id from manent.notification_cursor for update")).rows[0]!.id,
      );
      if (horizon <= after) {
        await client.query("commit");
        return 0;
      }
      const rows = await client.query<Record<string, unknown>>(
        `select e.id::text, to_char(e.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, e.tenant, e.type, e.data,
           d.id as d_id, d.kind, d.application, d.artifact, d.environment, d.version,
           r.id as r_id, r.application as r_application, r.artifact as r_artifact, r.version as r_version, r.environments
         from manent.event_log e left join manent.deploys d on d.id = e.deploy_id left join manent.releases r on r.id = e.release_id
         where e.id > $1 and e.id <= $2 and e.type = any($3::text[]) order by e.id limit $4`,
        [after, horizon, sourceTypes, limit],
      );
      for (const r of rows.rows) {
        for (const p of plan(sourceEvent(r))) {
          await client.query(
            `insert into manent.notifications (key, channel, tenant, deploy_id, release_id, event, facts)
             values ($1, $2, $3, $4, $5, $6, $7::jsonb) on conflict (key, channel) do nothing`,
            [
              p.key,
              p.channel,
              p.facts.tenant,
              p.facts.of === "deploy" ? p.facts.id : null,
              p.facts.of === "release" ? p.facts.id : null,
              p.facts.event,
              JSON.stringify(p.facts),
            ],
          );
        }
      }
      const full = rows.rows.length === limit;
      await client.query("update manent.notification_cursor set last_event_id = $1", [full ? rows.rows.at(-1)!.id : horizon]);
      await client.query("commit");
      return rows.rows.length;
    } catch (err) {
      await client.query("rollback").catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async claim(limit: number, leaseMs: number): Promise<Delivery[]> {
    const due = await this.pool.query<Row>(
      `update manent.notifications n set attempts = n.attempts + 1, lease_until = now() + make_interval(secs => $2)
       where n.id in (select id from manent.notifications where status = 'pending' and next_attempt_at <= now()
                        and (lease_until is null or lease_until < now()) order by id limit $1 for update skip locked)
       returning n.id::text, n.key, n.channel, n.facts, n.attempts`,
      [limit, leaseMs / 1000],
    );
    return due.rows.map((r) => ({ id: Number(r.id), key: r.key, channel: r.channel, facts: r.facts, attempts: r.attempts }));
  }

  async settle(d: Delivery, type: NotificationChannel["type"] | "unknown", outcome: DeliveryOutcome): Promise<void> {
    if (outcome.status === "pending") {
      await this.pool.query(
        `update manent.notifications set lease_until = null, last_error = $2, next_attempt_at = now() + make_interval(secs => $3)
         where id = $1 and status = 'pending'`,
        [d.id, outcome.error, outcome.retryInMs / 1000],
      );
      return;
    }
    const client = await this.pool.connect();
    try {
      await client.query("begin");
      const updated = await client.query(
        `update manent.notifications set status = $2, lease_until = null, last_error = $3, finished_at = now()
         where id = $1 and status = 'pending'`,
        [d.id, outcome.status, outcome.status === "failed" ? outcome.error : null],
      );
      // Settled already (a lease that ended while this attempt ran, and another server's attempt): written once.
      if (updated.rowCount === 1) {
        const ev = notificationEvents[outcome.status];
        const data = {
          channel: d.channel,
          channel_type: type,
          event: d.facts.event,
          attempts: d.attempts,
          ...(outcome.status === "failed" && { error: outcome.error }),
        };
        const f = d.facts;
        const id = await client.query<{ id: string }>(`select manent.append_event($1, $2, $3, $4::jsonb)::text as id`, [
          f.tenant,
          f.of === "deploy" ? f.id : null,
          ev.type,
          JSON.stringify(data),
        ]);
        if (f.of === "release") await client.query("update manent.events set release_id = $2 where id = $1", [id.rows[0]!.id, f.id]);
      }
      await client.query("commit");
    } catch (err) {
      await client.query("rollback").catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async nextDueMs(): Promise<number | undefined> {
    const r = await this.pool.query<{ ms: string | null }>(
      `select (extract(epoch from min(greatest(next_attempt_at, coalesce(lease_until, next_attempt_at)) - now())) * 1000)::bigint::text as ms
       from manent.notifications where status = 'pending'`,
    );
    const ms = r.rows[0]?.ms;
    return ms === null || ms === undefined ? undefined : Math.max(0, Number(ms));
  }

  async prune(olderThanMs: number): Promise<void> {
    await this.pool.query(
      `delete from manent.notifications where status <> 'pending' and finished_at < now() - make_interval(secs => $1)`,
      [olderThanMs / 1000],
    );
  }
}

function sourceEvent(r: Record<string, unknown>): SourceEvent {
  return {
    id: Number(r.id),
    at: r.at as string,
    tenant: r.tenant as string,
    type: r.type as string,
    data: (r.data as Record<string, unknown> | null) ?? {},
    deploy:
      r.d_id === null
        ? null
        : {
            id: r.d_id as string,
            kind: r.kind as string,
            application: r.application as string,
            artifact: r.artifact as string,
            environment: r.environment as string,
            version: r.version as string,
          },
    release:
      r.r_id === null
        ? null
        : {
            id: r.r_id as string,
            application: r.r_application as string,
            artifact: r.r_artifact as string,
            version: r.r_version as string,
            environments: r.environments as string[],
          },
  };
}
