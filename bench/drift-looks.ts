/**
 * What the drift scheduler's looks cost Postgres as the deploys kept grow: `--keys` keys with
 * `--deploys` deploys each (every 7th failed, every 50th a dry run), written straight into a
 * migrated database of the bench's own Postgres, then the look at every key
 * (`recordedReleases`) and the look at the keys of one ended deploy per key
 * (`recordedReleasesOf`), each timed `--rounds` times. Every server looks at every key every few
 * seconds, and at the keys of the deploys it ran once a second while deploys end.
 *
 * Run: node --import tsx bench/drift-looks.ts [--keys 100] [--deploys 2000] [--rounds 5]
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { PgDriftStore } from "../src/storage/pg-drift-store.js";
import { migrate } from "../src/storage/schema.js";
import { TestPostgres } from "../test/support/postgres.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    keys: { type: "string", default: "100" },
    deploys: { type: "string", default: "2000" },
    rounds: { type: "string", default: "5" },
  },
});
const keys = Number(opts.keys);
const deploys = Number(opts.deploys);

const postgres = await TestPostgres.start();
const pool = new pg.Pool({ connectionString: await postgres.createDatabase({ empty: true }) });
const machine = watchMachine();
try {
  await migrate(pool);
  await pool.query(
    `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request, created_at, finished_at)
     select 'd' || k || '-' || i, case when i % 50 = 0 then 'dry_run' else 'deploy' end, 't', 'app' || k, 'app' || k, 'prod',
       '1.0.' || i, case when i % 7 = 0 then 'failed' else 'succeeded' end, '{}'::jsonb,
       now() - ($2 - i) * interval '1 minute', now() - ($2 - i) * interval '1 minute' + interval '10 seconds'
     from generate_series(1, $1::int) k, generate_series(1, $2::int) i`,
    [keys, deploys],
  );
  await pool.query("analyze manent.deploys");
  const store = new PgDriftStore(pool);
  const ended = Array.from({ length: keys }, (_, k) => `d${k + 1}-${deploys - 1}`);
  const time = async (fn: () => Promise<unknown[]>) => {
    const start = performance.now();
    const n = (await fn()).length;
    return { ms: performance.now() - start, n };
  };
  console.log(`${keys} keys, ${deploys} deploys each`);
  for (let r = 0; r < Number(opts.rounds); r++) {
    const every = await time(() => store.recordedReleases());
    const of = await time(() => store.recordedReleasesOf(ended));
    console.log(
      `look at every key: ${every.n} releases in ${every.ms.toFixed(1)} ms; at the keys of ${keys} ended deploys: ${of.n} in ${of.ms.toFixed(1)} ms`,
    );
  }
} finally {
  await pool.end();
  await postgres.stop();
}
machine.report();
