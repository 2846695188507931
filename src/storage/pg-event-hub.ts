import pg from "pg";
import type { Logger } from "../core/contract/index.js";
import type { DeployEvent } from "../core/engine/deploy-events.js";
import { eventsChannel } from "./events-schema.js";

/** Which events a reader wants: one deploy's, or one tenant's ("*" or absent: all tenants). */
export interface EventFilter {
  deployId?: string;
  tenant?: string;
}

type Listener = (event: DeployEvent) => void;

const pageSize = 500;

/**
 * One server's view of the event log: a dedicated connection LISTENs to `manent_events`; each
 * notification (whichever server's write caused it) makes the hub read the events after the last
 * one it delivered and hand them to its subscribers (SSE streams, `?wait=`). Nothing here runs on
 * a timer: without writes there are no reads. After a lost connection it reconnects and catches up.
 */
export class PgEventHub {
  private client: pg.Client | undefined;
  private readonly listeners = new Set<{ filter: EventFilter; fn: Listener; onClose: (() => void) | undefined }>();
  private lastId = 0;
  private reading: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private retryMs = 100;
  private retryTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    private readonly logger: Logger,
  ) {}

  static async start(pool: pg.Pool, databaseUrl: string, logger: Logger): Promise<PgEventHub> {
    const hub = new PgEventHub(pool, databaseUrl, logger);
    hub.lastId = await hub.maxId();
    await hub.connect();
    return hub;
  }

  /** Events after `afterId` that match, oldest first (at most `limit`). */
  async read(afterId: number, filter: EventFilter, limit = pageSize): Promise<DeployEvent[]> {
    const where = ["id > $1"];
    const args: unknown[] = [afterId];
    if (filter.deployId !== undefined) where.push(`deploy_id = $${args.push(filter.deployId)}`);
    if (filter.tenant !== undefined && filter.tenant !== "*") where.push(`tenant = $${args.push(filter.tenant)}`);
    const rows = await this.pool.query(
      `select id, at, tenant, deploy_id, type, data from manent.events where ${where.join(" and ")} order by id limit $${args.push(limit)}`,
      args,
    );
    return rows.rows.map(toEvent);
  }

  /** The newest event id (0 for none): where a live-only stream starts. */
  async maxId(): Promise<number> {
    const r = await this.pool.query<{ id: string | null }>(`select max(id)::text as id from manent.events`);
    return Number(r.rows[0]?.id ?? 0);
  }

  /**
   * Calls `fn` with every new event that matches, until the returned function is called;
   * `onClose` when the hub closes (the server stops), so a stream can end.
   */
  subscribe(filter: EventFilter, fn: Listener, onClose?: () => void): () => void {
    const entry = { filter, fn, onClose };
    this.listeners.add(entry);
    return () => this.listeners.delete(entry);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    for (const l of this.listeners) l.onClose?.();
    this.listeners.clear();
    await this.reading?.catch(() => undefined);
    await this.client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on("notification", () => this.fetchNew());
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

  /** Reads what is new; notifications arriving during a read make it read once more after. */
  private fetchNew(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        for (;;) {
          const events = await this.read(this.lastId, {});
          for (const e of events) this.deliver(e);
          if (events.length > 0) this.lastId = events[events.length - 1]!.id;
          if (events.length < pageSize) break;
        }
      } while (this.again && !this.closed);
    })()
      .catch((err: unknown) => this.logger.warn("cannot read new events", { error: String(err) }))
      .finally(() => {
        this.reading = undefined;
        if (this.again && !this.closed) this.fetchNew();
      });
  }

  private deliver(e: DeployEvent): void {
    for (const { filter, fn } of this.listeners) {
      if (filter.deployId !== undefined && filter.deployId !== e.deploy_id) continue;
      if (filter.tenant !== undefined && filter.tenant !== "*" && filter.tenant !== e.tenant) continue;
      try {
        fn(e);
      } catch (err) {
        this.logger.warn("event subscriber failed", { error: String(err) });
      }
    }
  }
}

function toEvent(r: Record<string, unknown>): DeployEvent {
  return {
    id: Number(r.id),
    at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
    tenant: r.tenant as string,
    deploy_id: (r.deploy_id as string | null) ?? null,
    type: r.type as string,
    data: (r.data as Record<string, unknown>) ?? {},
  };
}
