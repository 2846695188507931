import assert from "node:assert/strict";
import pg from "pg";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import { PgEventHub } from "../../src/storage/pg-event-hub.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "./postgres.js";

/** A logger that says nothing: the hub's reconnect and stream messages are not what these tests check. */
export const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A real event hub on a fresh migrated database, with the event writer and the delivery wait its
 * tests share (one copy for the hub's and the SSE streams' tests).
 */
export class EventHubDatabase {
  server: TestPostgres | undefined;
  pool: pg.Pool | undefined;
  hub: PgEventHub | undefined;

  /** For `before`: a hub keeping `keep` recent events in memory (the hub's default when unset). */
  async start(keep?: number): Promise<{ pool: pg.Pool; hub: PgEventHub }> {
    this.server = await TestPostgres.start();
    const pool = new pg.Pool({ connectionString: await this.server.createDatabase({ empty: true }), max: 4 });
    this.pool = pool;
    // An idle connection told by the stopping Postgres that it ends is no failure of the test.
    pool.on("error", () => undefined);
    await migrate(pool);
    const hub = await PgEventHub.start(pool, pool.options.connectionString!, quiet, { recent: keep });
    this.hub = hub;
    return { pool, hub };
  }

  /** For `after`: whatever `start` got to. */
  async stop(): Promise<void> {
    await this.hub?.close();
    await this.pool?.end();
    await this.server?.stop();
  }

  /** Appends `n` events of `tenant`, one transaction each; their ids. */
  readonly append = async (tenant: string, n: number): Promise<number[]> => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = await this.started().pool.query<{ id: string }>(
        "select manent.append_event($1, null, 'test.event', $2::jsonb)::text as id",
        [tenant, JSON.stringify({ i })],
      );
      ids.push(Number(r.rows[0]!.id));
    }
    return ids;
  };

  /** Resolves once the hub has delivered the event `id` (its position has reached it). */
  readonly reached = (id: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const { hub } = this.started();
      if (hub.position >= id) return resolve();
      const stop = hub.subscribe({}, (e) => {
        if (e.id >= id) {
          stop();
          resolve();
        }
      });
    });

  private started(): { pool: pg.Pool; hub: PgEventHub } {
    if (!this.pool || !this.hub) throw new Error("EventHubDatabase: start() has not run");
    return { pool: this.pool, hub: this.hub };
  }
}

/** A stream's receiving end: the text written to it, parsed into events and keep-alive comments. */
export class Received {
  text = "";
  ended = false;
  /** What the sink says the client has not taken yet (a response's writableLength). */
  pendingBytes = 0;
  /** Each returns true once it has resolved its promise. */
  private waiters: (() => boolean)[] = [];
  readonly sink = {
    write: (text: string) => {
      assert.equal(this.ended, false, "written after its end");
      this.text += text;
      this.changed();
    },
    end: () => {
      this.ended = true;
      this.changed();
    },
    pending: () => this.pendingBytes,
  };
  events(): DeployEvent[] {
    return [...this.text.matchAll(/^data: (.*)\nid: (\d+)\n\n/gm)].map((m) => {
      const e = JSON.parse(m[1]!) as DeployEvent;
      assert.equal(e.id, Number(m[2]), "the id line is the event's id");
      return e;
    });
  }
  ids(): number[] {
    return this.events().map((e) => e.id);
  }
  /** Resolves once `done()` holds for what was received. */
  until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(() => {
        if (!done()) return false;
        resolve();
        return true;
      });
    });
  }
  private changed(): void {
    this.waiters = this.waiters.filter((w) => !w());
  }
}
