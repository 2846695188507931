/**
 * Issue 31: what the event hubs of a fleet cost per event, when they read only what their
 * subscribers want against when they read every event (as before: the drift checks subscribed to
 * every event). Three hubs (three servers' worth) on one real Postgres, each with what a server
 * has subscribed while deploys run and nobody watches a stream: the drift checks (finish events)
 * and a `?wait=` for each deploy it was sent (round robin). Writers write each deploy's rows as
 * the engine does, one transaction each, and the tables' triggers the events (created, running,
 * three steps started and succeeded, a target, succeeded: 10). Each mode runs in turn on the same
 * Postgres, alternating, `--rounds` times:
 *  - narrow: the subscriptions as they are;
 *  - wide: each hub also has a subscriber of every event (what the drift checks were before).
 * Printed per event written: the hubs' read statements and the rows they returned (all three),
 * the CPU of this process (writers and hubs) and of Postgres (every backend), from /proc.
 *
 * Run: node --import tsx bench/event-hub-reads.ts [--deploys 400] [--writers 20] [--rounds 2]
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { finishEventTypes } from "../src/core/engine/deploy-events.js";
import { PgEventHub } from "../src/storage/pg-event-hub.js";
import { TestPostgres } from "../test/support/postgres.js";
import { cpuWindow, postgresProcesses } from "./support/process-cpu.js";
import { watchMachine } from "./support/machine-share.js";

const machine = watchMachine();

const { values: opts } = parseArgs({
  options: {
    deploys: { type: "string", default: "400" },
    writers: { type: "string", default: "20" },
    rounds: { type: "string", default: "2" },
  },
});
const deploys = Number(opts.deploys);
const writers = Number(opts.writers);
const rounds = Number(opts.rounds);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const server = await TestPostgres.start();
const url = await server.createDatabase();
const port = Number(new URL(url).port);
const writePool = new pg.Pool({ connectionString: url, max: writers });
// An idle connection told by the stopping Postgres that it ends is no failure of the bench.
writePool.on("error", () => undefined);
let rowsRead = 0;
let reads = 0;
const hubs: PgEventHub[] = [];
const hubPools: pg.Pool[] = [];
for (let i = 0; i < 3; i++) {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on("error", () => undefined);
  const query = pool.query.bind(pool) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
  (pool as unknown as { query: typeof query }).query = async (text: string, values?: unknown[]) => {
    const r = await query(text, values);
    if (typeof text === "string" && text.includes("read_events_matching(")) {
      reads++;
      rowsRead += r.rows.filter((row: { id: unknown }) => row.id !== null).length;
    }
    return r;
  };
  hubPools.push(pool);
  const hub = await PgEventHub.start(pool, url, quiet);
  hub.subscribe({ types: finishEventTypes }, () => undefined, undefined, { background: true });
  hubs.push(hub);
}

const steps = ["fetch", "deploy", "verify"];

/**
 * One deploy, written to manent's tables as the engine writes a no-op deploy (its triggers write
 * the events: created, running, each step started and succeeded, its target, succeeded), one
 * transaction each, with a `?wait=` on one hub meanwhile; the id of its last event.
 */
async function deploy(n: number): Promise<number> {
  const id = `d-${n}-${Math.random().toString(36).slice(2, 10)}`;
  const stop = hubs[n % hubs.length]!.subscribe({ deployId: id, types: finishEventTypes }, () => undefined);
  const q = (text: string, values: unknown[]) => writePool.query(text, values);
  await q(
    `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request, submitted_by)
     values ($1, 'deploy', 'untenanted', $2, 'dist/app.txt', 'bench', 'sha256:5f3c2a8e0b6d4c1f9a7e3b2d8c6f4a1e0b9d7c5a3e1f8b6d4c2a0e9f7b5d3c1a', 'queued', '{}'::jsonb, 'bench')`,
    [id, `app${n % 100}`],
  );
  await q("update manent.deploys set status = 'running', plugin = 'noop', started_at = now() where id = $1", [id]);
  for (const [seq, name] of steps.entries()) {
    await q(
      "insert into manent.deploy_steps (deploy_id, seq, name, status, attempts, started_at) values ($1, $2, $3, 'running', 1, now())",
      [id, seq, name],
    );
    if (name === "deploy")
      await q(
        `insert into manent.deploy_targets (deploy_id, phase, host, status, duration_ms, details)
         values ($1, 'deploy', $2, 'succeeded', 3, '{"changed": false}'::jsonb)`,
        [id, `h${n}`],
      );
    await q(
      "update manent.deploy_steps set status = 'succeeded', finished_at = now(), duration_ms = 4 where deploy_id = $1 and name = $2",
      [id, name],
    );
  }
  await q("update manent.deploys set status = 'succeeded', finished_at = now() where id = $1", [id]);
  stop();
  return Number((await q("select max(id)::text as id from manent.events where deploy_id = $1", [id])).rows[0].id);
}

async function run(mode: "narrow" | "wide"): Promise<string> {
  const wide = mode === "wide" ? hubs.map((h) => h.subscribe({}, () => undefined, undefined, { background: true })) : [];
  const start = Number((await writePool.query<{ id: string }>("select coalesce(max(id), 0)::text as id from manent.events")).rows[0]!.id);
  rowsRead = 0;
  reads = 0;
  const self = cpuWindow(() => [process.pid]);
  const postgres = cpuWindow(() => postgresProcesses(port));
  let next = 0;
  let last = 0;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (next < deploys) last = Math.max(last, await deploy(next++));
    }),
  );
  while (hubs.some((h) => h.position < last)) await sleep(5);
  const nodeMs = self.stop() * 1000;
  const pgMs = postgres.stop() * 1000;
  for (const stop of wide) stop();
  const events = last - start;
  return `${mode}: ${events} events, the 3 hubs' reads ${(reads / events).toFixed(2)} and rows read ${(rowsRead / events).toFixed(2)} per event; CPU per event: this process ${(nodeMs / events).toFixed(3)} ms, Postgres ${(pgMs / events).toFixed(3)} ms`;
}

// A warm-up of each, then the rounds alternating.
await run("wide");
await run("narrow");
for (let i = 0; i < rounds; i++) for (const mode of ["wide", "narrow"] as const) console.log(await run(mode));
for (const h of hubs) await h.close();
for (const p of hubPools) await p.end();
await writePool.end();
await server.stop();
machine.report();
