/**
 * Issue 31: Postgres's own time for the writes that carry a deploy's events, per transaction, on
 * this checkout's schema (migrated as the server migrates it). Each case is a loop in a procedure
 * that commits after every statement, so what is timed is Postgres's work alone (no client, no
 * network): the statement, its triggers (the event's payload, `append_event`, the claim) and the
 * commit, with `synchronous_commit = off` so that the disk's flush does not hide the CPU. One
 * connection, nothing else running on the database.
 *
 * Cases: a deploy's update that writes no event (the deploy step's gate), a deploy's status change
 * (a `deploy.status`), a step's start or end (a `step.*`), and beside them an event appended alone
 * (`append_event`) and an empty transaction.
 *
 * Run: node --import tsx bench/event-triggers.ts [--transactions 3000] [--rounds 3] [--json]
 * (on an earlier commit: copy this file into a checkout of it and run it there).
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { TestPostgres } from "../test/support/postgres.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    transactions: { type: "string", default: "3000" },
    rounds: { type: "string", default: "3" },
    json: { type: "boolean", default: false },
  },
});
const transactions = Number(opts.transactions);
const rounds = Number(opts.rounds);

const cases: Record<string, string> = {
  empty_transaction: `perform 1;`,
  deploy_update_without_event: `update manent.deploys set deploy_started_at = clock_timestamp() where id = 'bench-1';`,
  deploy_status_change: `update manent.deploys set status = case when status = 'running' then 'queued' else 'running' end where id = 'bench-1';`,
  step_start_or_end: `update manent.deploy_steps set status = case when status = 'running' then 'succeeded' else 'running' end,
    attempts = attempts + 1, duration_ms = 3 where deploy_id = 'bench-1' and name = 'resolve';`,
  append_event: `perform manent.append_event('untenanted', 'bench-1', 'bench.appended', '{"name": "resolve", "attempt": 1}');`,
};

const server = await TestPostgres.start();
const db = new pg.Client({ connectionString: await server.createDatabase() });
await db.connect();
const machine = watchMachine();
try {
  await db.query(`set synchronous_commit = off`);
  // A deploy and a step as a no-op deploy writes them (its request and settings of that size).
  const request = {
    kind: "deploy",
    overrides: {},
    descriptor: { artifact: { name: "one", type: "file", source: "/srv/app.txt", version: "1.0.3" } },
  };
  await db.query(
    `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request, submitted_by, envconfig)
     values ('bench-1', 'deploy', 'untenanted', 'one', 'one', 'bench', '1.0.3', 'running', $1, 'anonymous', $2)`,
    [
      JSON.stringify(request),
      JSON.stringify({ path: "./envconfig/untenanted/one/one/bench.yml", sha256: "a".repeat(64), provider: "file" }),
    ],
  );
  await db.query(`insert into manent.deploy_steps (deploy_id, seq, name, status, attempts) values ('bench-1', 1, 'resolve', 'running', 1)`);

  const perTransactionUs: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round++) {
    for (const [name, statement] of Object.entries(cases)) {
      await db.query(`create or replace procedure pg_temp.bench_loop(n integer) language plpgsql as $$
        begin for i in 1..n loop ${statement} commit; end loop; end $$`);
      await db.query(`call pg_temp.bench_loop(200)`); // plans cached, pages warm
      const started = process.hrtime.bigint();
      await db.query(`call pg_temp.bench_loop(${transactions})`);
      (perTransactionUs[name] ??= []).push(Number(process.hrtime.bigint() - started) / 1000 / transactions);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const figures = Object.fromEntries(Object.entries(perTransactionUs).map(([k, v]) => [k, Math.round(median(v) * 10) / 10]));
  const share = machine.report();
  if (opts.json) console.log(JSON.stringify({ ...share, bench: "event-triggers", transactions, rounds, us_per_transaction: figures }));
  else {
    console.log(`Postgres's time per transaction (median of ${rounds} rounds of ${transactions}), µs:`);
    for (const [k, v] of Object.entries(figures)) console.log(`  ${k.padEnd(30)} ${v}`);
  }
} finally {
  await db.end();
  await server.stop();
}
