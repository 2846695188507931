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
});
