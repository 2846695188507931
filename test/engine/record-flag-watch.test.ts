import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, it, mock } from "node:test";
import type { Logger } from "../../src/core/contract/index.js";
import { CancelWatch } from "../../src/core/engine/user-cancel.js";
import { databasePool } from "../../src/storage/database-pool.js";
import { retryingQueries } from "../../src/storage/database-health.js";
import { PgDeployStore } from "../../src/storage/pg-deploy-store.js";

/** A port nothing listens on: a connection to it is refused, as to a database that went away. */
async function refusedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as { port: number };
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/**
 * The watch of a flag on deploys' records (src/core/engine/record-flag-watch.ts), as the server
 * builds it: a user's cancel read through the workflows' store, whose reads wait out an
 * unavailable database. It found a server that had lost its Postgres an hour before making about
 * 470 connection attempts a second: a read per tick whatever the one before was doing.
 */
describe("record flag watch", () => {
  it("reads one at a time while the database is away: no read starts while one waits for it", async () => {
    let sawRetry!: () => void;
    const retrying = new Promise<void>((resolve) => (sawRetry = resolve));
    const logger: Logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: (msg) => {
        if (msg === "database unavailable: retrying") sawRetry();
      },
      error: () => undefined,
    };
    const pool = databasePool({ connectionString: `postgres://manent:x@127.0.0.1:${await refusedPort()}/manent`, max: 2 });
    const store = new PgDeployStore(retryingQueries(pool, logger));
    let started = 0;
    const counting = Object.assign(Object.create(store) as PgDeployStore, {
      cancelsRequested: (ids: string[]) => {
        started++;
        return store.cancelsRequested(ids);
      },
    });
    // The watch's interval on a mocked clock; the reads, their connections and their backoff on the real one.
    mock.timers.enable({ apis: ["setInterval"] });
    try {
      const watch = new CancelWatch(counting, 20);
      const w = watch.watch("d-1");
      mock.timers.tick(20);
      assert.equal(started, 1, "the first tick reads");
      // The read has found the database away and waits to try again.
      await retrying;
      for (let i = 0; i < 50; i++) mock.timers.tick(20);
      assert.equal(started, 1, "no tick started a read beside the one waiting");
      w.stop();
    } finally {
      mock.timers.reset();
      // The waiting read's next try fails on the ended pool, which ends it.
      await pool.end();
    }
  });
});
