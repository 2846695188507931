import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { databasePool, pipelinedTransaction } from "../../src/storage/database-pool.js";
import { TestPostgres } from "../support/postgres.js";

/**
 * The server's pool on a real Postgres whose backend is terminated under a lent-out client, as a
 * Postgres restart or a failover does: pg reports that client's error to nobody, which Node makes
 * an uncaught exception (the test runner fails the file on one).
 */
describe("database pool", () => {
  let server: TestPostgres;
  let url: string;

  before(async () => {
    server = await TestPostgres.start();
    url = await server.createDatabase({ empty: true });
  });
  after(async () => {
    await server?.stop();
  });

  it("survives the connection of a client it lent dropping between two queries, and serves the next query", async () => {
    const pool = databasePool({ connectionString: url, max: 2 });
    pool.on("error", () => undefined); // what server.ts does for idle clients
    const client = await pool.connect();
    try {
      await client.query("begin");
      const pid = (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      // Not events.once: it would listen for the error this test is about.
      const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
      try {
        assert.equal((await admin.query("select pg_terminate_backend($1) as done", [pid])).rows[0].done, true);
      } finally {
        await admin.end();
      }
      await ended;
      await assert.rejects(client.query("commit"));
    } finally {
      client.release(true);
    }
    assert.equal((await pool.query<{ one: number }>("select 1 as one")).rows[0]!.one, 1);
    await pool.end();
  });

  it("prepares a statement with parameters once per connection, and keeps at most 256 texts prepared", async () => {
    const pool = databasePool({ connectionString: url, max: 1 });
    try {
      const prepared = async () =>
        (await pool.query<{ n: number }>("select count(*)::int as n from pg_prepared_statements where name like 'manent_%'")).rows[0]!.n;
      for (let i = 0; i < 3; i++) assert.equal((await pool.query<{ v: number }>("select $1::int + 1 as v", [i])).rows[0]!.v, i + 1);
      assert.equal(await prepared(), 1, "three calls of one text: one prepared statement on the pool's one connection");
      // Without parameters: sent as it is (a "begin", a count), nothing prepared.
      assert.equal(await prepared(), 1);
      for (let i = 0; i < 300; i++)
        assert.equal((await pool.query<{ v: string }>(`select $1::text || '-${i}' as v`, ["x"])).rows[0]!.v, `x-${i}`);
      assert.equal(await prepared(), 256, "texts beyond the 256th run unnamed");
    } finally {
      await pool.end();
    }
  });

  it("runs a prepared statement again unnamed when a migration changed its result's columns", async () => {
    const pool = databasePool({ connectionString: url, max: 1 });
    try {
      await pool.query("create table widened (a int)");
      await pool.query("insert into widened values (1)");
      const read = () => pool.query<Record<string, number | null>>("select * from widened where a = $1", [1]);
      assert.deepEqual((await read()).rows, [{ a: 1 }]);
      await pool.query("alter table widened add column b int");
      assert.deepEqual((await read()).rows, [{ a: 1, b: null }], "on its own: sent again unnamed");
      assert.deepEqual((await read()).rows, [{ a: 1, b: null }], "then prepared afresh under a new name");
      // In a transaction the error has aborted it: it reaches the caller, whose next try works.
      await pool.query("alter table widened add column c int");
      const client = await pool.connect();
      try {
        await client.query("begin");
        await assert.rejects(client.query("select * from widened where a = $1", [1]), /cached plan must not change result type/);
        await client.query("rollback");
        await client.query("begin");
        assert.deepEqual((await client.query("select * from widened where a = $1", [1])).rows, [{ a: 1, b: null, c: null }]);
        await client.query("commit");
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  });

  it("sends a pipelined transaction's BEGIN, statements and COMMIT in one write; a failure rolls all back and names its statement", async () => {
    const pool = databasePool({ connectionString: url, max: 1 });
    try {
      await pool.query("create table piped (k int primary key, v text)");
      // The pool's one connection, its socket's writes counted.
      const client = await pool.connect();
      type Write = (...a: unknown[]) => unknown;
      const socket = (client as unknown as { connection: { stream: { _write: Write; _writev: Write } } }).connection.stream;
      let writes = 0;
      for (const method of ["_write", "_writev"] as const) {
        const original = socket[method].bind(socket);
        socket[method] = (...a: unknown[]) => {
          writes++;
          return original(...a);
        };
      }
      client.release();

      const results = await pipelinedTransaction(pool, [
        { sql: "insert into piped values ($1, $2)", params: [1, "one"] },
        { sql: "update piped set v = v || $2 where k = $1 returning v", params: [1, "+"] },
      ]);
      assert.equal(writes, 1, "BEGIN, two statements and COMMIT: one write");
      assert.deepEqual(
        results.map((r) => [r.command, r.rowCount, r.rows]),
        [
          ["INSERT", 1, []],
          ["UPDATE", 1, [{ v: "one+" }]],
        ],
        "each statement's result, in order (the update saw the insert)",
      );

      const seen: [number, string][] = [];
      await assert.rejects(
        pipelinedTransaction(
          pool,
          [
            { sql: "insert into piped values ($1, $2)", params: [2, "two"] },
            { sql: "insert into piped values ($1, $2)", params: [1, "again"] },
            { sql: "insert into piped values ($1, $2)", params: [3, "three"] },
          ],
          (index, err) => {
            seen.push([index, (err as { code: string }).code]);
            return new Error(`statement ${index} failed`);
          },
        ),
        /statement 1 failed/,
      );
      assert.deepEqual(seen, [[1, "23505"]], "the first failure only: the duplicate key; the one after it failed as aborted");
      assert.deepEqual((await pool.query("select k, v from piped order by k")).rows, [{ k: 1, v: "one+" }], "nothing of it kept");
      assert.equal((await pool.query<{ v: number }>("select $1::int as v", [7])).rows[0]!.v, 7, "the connection is usable after");
    } finally {
      await pool.end();
    }
  });
});
