import type pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { dbosSchema } from "./reconcile-deploys.js";

export interface FleetOptions {
  executorId: string;
  /** This build's DBOS application version: a server does not take over a dead peer of a newer one. */
  applicationVersion: string;
  heartbeatMs: number;
  deadAfterMs: number;
  /** Hands the dead server's pending workflows to the live ones (DBOS recovery for that executor); resolves with how many. */
  recover: (executorId: string) => Promise<number>;
}

/**
 * Servers sharing one Postgres (each with its own `dbos.executor_id`) record a heartbeat there.
 * A server whose heartbeat is older than `dead_after` is dead: one live server claims it (the
 * claim is one conditional update, so exactly one server wins it) and recovers its pending
 * workflows through DBOS, which re-queues them for the whole fleet. A claimant that dies before it
 * finishes is itself claimed later, and its claim with it. DBOS recovers only workflows of the
 * recovering server's own version, so a dead peer of a newer version (launched on this database
 * after this one) is left to a server of that version: an older one claiming it would strand them.
 */
export class FleetHeartbeats {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  /** Since when this server's own heartbeats have all been written: after an outage, peers get time to beat again. */
  private healthySince: number | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly logger: Logger,
    private readonly opts: FleetOptions,
  ) {}

  async start(): Promise<void> {
    await this.pool.query(`create table if not exists manent.servers (
       executor_id text primary key,
       started_at timestamptz not null default now(),
       heartbeat_at timestamptz not null default now(),
       taken_over_by text,
       taken_over_at timestamptz
     )`);
    await this.pool.query(`alter table manent.servers add column if not exists application_version text`);
    await this.beat();
    this.timer = setInterval(() => {
      this.beating ??= this.beat().finally(() => (this.beating = undefined));
    }, this.opts.heartbeatMs);
    this.timer.unref();
  }

  /** The servers on record: alive (a heartbeat within dead_after) and dead (not taken over yet). */
  async servers(): Promise<{ alive: number; dead: number }> {
    const r = await this.pool.query<{ alive: number; dead: number }>(
      `select count(*) filter (where heartbeat_at >= now() - make_interval(secs => $1))::int as alive,
              count(*) filter (where heartbeat_at < now() - make_interval(secs => $1))::int as dead
       from manent.servers`,
      [this.opts.deadAfterMs / 1000],
    );
    return r.rows[0] ?? { alive: 0, dead: 0 };
  }

  /** Stops beating and leaves the fleet: a server that stops cleanly has no pending deploys to hand over. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.pool.query(`delete from manent.servers where executor_id = $1`, [this.opts.executorId]).catch(() => undefined);
  }

  private async beat(): Promise<void> {
    const { executorId, deadAfterMs } = this.opts;
    try {
      await this.pool.query(
        `insert into manent.servers (executor_id, application_version) values ($1, $2)
         on conflict (executor_id) do update
           set heartbeat_at = now(), taken_over_by = null, taken_over_at = null, application_version = $2`,
        [executorId, this.opts.applicationVersion],
      );
    } catch (err) {
      this.healthySince = undefined;
      this.logger.warn("fleet heartbeat not recorded", { error: (err as Error).message });
      return;
    }
    const now = Date.now();
    this.healthySince ??= now;
    // Right after an outage every peer looks dead: they get `dead_after` to beat again first.
    if (now - this.healthySince < deadAfterMs) return;
    await this.takeOverDeadPeers().catch((err: unknown) => this.logger.warn("fleet takeover failed", { error: (err as Error).message }));
  }

  private async takeOverDeadPeers(): Promise<void> {
    const { executorId, deadAfterMs, applicationVersion } = this.opts;
    const claimed = await this.pool.query<{ executor_id: string; heartbeat_at: Date }>(
      `update manent.servers s set taken_over_by = $1, taken_over_at = now()
       where executor_id <> $1 and heartbeat_at < now() - make_interval(secs => $2)
         and (taken_over_at is null or taken_over_at < now() - make_interval(secs => $2))
         and not exists (select 1 from ${dbosSchema}.application_versions theirs, ${dbosSchema}.application_versions mine
                         where theirs.version_name = s.application_version and mine.version_name = $3
                           and theirs.version_timestamp > mine.version_timestamp)
       returning executor_id, heartbeat_at`,
      [executorId, deadAfterMs / 1000, applicationVersion],
    );
    for (const peer of claimed.rows) {
      const recovered = await this.opts.recover(peer.executor_id);
      this.logger.warn("took over the pending deploys of a dead server", {
        dead_executor_id: peer.executor_id,
        last_heartbeat: peer.heartbeat_at.toISOString(),
        workflows: recovered,
      });
      await this.pool.query(`delete from manent.servers where executor_id = $1 and taken_over_by = $2`, [peer.executor_id, executorId]);
    }
  }
}
