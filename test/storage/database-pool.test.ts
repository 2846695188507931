import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { databasePool } from "../../src/storage/database-pool.js";
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
});
