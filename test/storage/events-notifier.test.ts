import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { databasePool } from "../../src/storage/database-pool.js";
import { EventsNotifier } from "../../src/storage/events-notifier.js";
import { eventsChannel } from "../../src/storage/events-schema.js";
import { PgEventHub } from "../../src/storage/pg-event-hub.js";
import { migrate } from "../../src/storage/schema.js";
import { TestPostgres } from "../support/postgres.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A server's own sessions leave the event log's NOTIFY to the server, which sends one for all its
 * event-writing commits of a window (events-notifier.ts); any other session NOTIFYs at its commit.
 * What a listener got before a point is read with a probe: NOTIFYs reach a listener in commit
 * order, so once a NOTIFY on the probe channel committed after the writes has arrived, any NOTIFY
 * the writes sent has arrived before it.
 */
describe("events notifier: one NOTIFY per window of a server's commits", () => {
  let server: TestPostgres;
  let url: string;
  let listener: pg.Client;
  const got = { events: 0, probes: 0 };
  const waiters: { kind: keyof typeof got; count: number; resolve: () => void }[] = [];
  const pools: pg.Pool[] = [];

  const arrived = (kind: keyof typeof got, count: number) =>
    new Promise<void>((resolve, reject) => {
      if (got[kind] >= count) return resolve();
      const timer = setTimeout(() => reject(new Error(`${got[kind]} ${kind}, not ${count}, after 60 s`)), 60_000);
      waiters.push({
        kind,
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  /** How many NOTIFYs of the event log arrived before a probe committed now. */
  const eventsNotifiedSoFar = async (): Promise<number> => {
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    const before = got.probes;
    await probe.query("notify manent_test_probe");
    await probe.end();
    await arrived("probes", before + 1);
    return got.events;
  };
  const append = (db: pg.Pool | pg.Client) => db.query("select manent.append_event('team-a', null, 'test.written', '{}'::jsonb)");
  const serverPool = (notifier: { attach(client: pg.PoolClient): void }) => {
    const pool = databasePool({ connectionString: url, max: 3 }, { onConnect: (client) => notifier.attach(client) });
    pools.push(pool);
    return pool;
  };

  before(async () => {
    server = await TestPostgres.start();
    url = await server.createDatabase({ empty: true });
    const setup = new pg.Pool({ connectionString: url });
    await migrate(setup);
    await setup.end();
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on("notification", (n) => {
      if (n.channel === eventsChannel) got.events++;
      else got.probes++;
      for (const w of [...waiters]) {
        if (got[w.kind] < w.count) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    });
    await listener.query(`listen ${eventsChannel}`);
    await listener.query("listen manent_test_probe");
  });
  after(async () => {
    for (const p of pools) await p.end();
    await listener?.end();
    await server?.stop();
  });

  it("sends none at the commits of the server's sessions, then one for all of them; tells its own hub of each at once", async () => {
    let sent = 0;
    // A window no test waits out: the NOTIFY goes when the notifier closes.
    const notifier = new EventsNotifier(
      async (sql) => {
        sent++;
        return listener.query(sql);
      },
      quiet,
      3_600_000,
    );
    let told = 0;
    notifier.alsoTell(() => told++);
    const pool = serverPool(notifier);
    const start = await eventsNotifiedSoFar();
    for (let i = 0; i < 5; i++) await append(pool);
    await Promise.all([append(pool), append(pool), append(pool)]);
    assert.equal(await eventsNotifiedSoFar(), start, "no NOTIFY at the commits");
    assert.equal(sent, 0);
    assert.equal(told, 8, "the server's own hub is told of each commit at once");
    await notifier.close();
    await arrived("events", start + 1);
    assert.equal(sent, 1, "one NOTIFY for the eight commits");
    assert.equal(await eventsNotifiedSoFar(), start + 1);
  });

  it("notifies a hub of another server within its window", async () => {
    let pool: pg.Pool | undefined;
    const notifier = new EventsNotifier((sql) => pool!.query(sql), quiet);
    pool = serverPool(notifier);
    // The other server's hub, on a pool of its own.
    const hubPool = new pg.Pool({ connectionString: url, max: 2 });
    pools.push(hubPool);
    const hub = await PgEventHub.start(hubPool, url, quiet);
    try {
      const seen = new Promise<number>((resolve) => {
        const stop = hub.subscribe({ types: ["test.other-server"] }, (e) => {
          stop();
          resolve(e.id);
        });
      });
      const id = Number(
        (await pool.query<{ id: string }>("select manent.append_event('team-a', null, 'test.other-server', '{}'::jsonb)::text as id"))
          .rows[0]!.id,
      );
      assert.equal(await seen, id);
    } finally {
      await hub.close();
      await notifier.close();
    }
  });

  it("a session whose notices would not reach its client, or of another program, NOTIFYs at its commit", async () => {
    const quietSession = new pg.Client({ connectionString: url });
    await quietSession.connect();
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await quietSession.query("set manent.notify_by = 'server'");
      await quietSession.query("set client_min_messages = warning");
      const start = await eventsNotifiedSoFar();
      await append(quietSession);
      assert.equal(await eventsNotifiedSoFar(), start + 1);
      await append(other);
      assert.equal(await eventsNotifiedSoFar(), start + 2);
    } finally {
      await quietSession.end();
      await other.end();
    }
  });
});
