/**
 * Issue 31, item 2: what the event log costs where deploys write it and readers read it, against
 * `--ref`'s. For each side, on a database of its own of the bench's Postgres: that side's server
 * started once (its migrations) and stopped, then `--deploys` no-op deploys written by statements
 * of the shapes the engine's have, one statement each over all the deploys (so the log's triggers
 * run as they do for a deploy, in bulk): recorded queued, started, five steps started and ended, a
 * target recorded, ended. Printed per side:
 *  - seconds to write them, and the bytes kept per deploy by the deploy's tables and the log
 *    (relation sizes, indexes included, after a VACUUM);
 *  - `--one-by-one` more deploys written as the engine writes one: a statement per change, each
 *    committed on its own (a step's end with the next step's start) through the server's pool
 *    (named statements, a transaction in one write), one deploy after another on one connection;
 *    the CPU that connection's backend took per deploy (/proc; the log's claims and triggers run
 *    once per transaction here, not once per statement over all deploys), and the time per deploy;
 *  - milliseconds per read (`--reads` of each, after as many to warm up): the hubs' read of one
 *    deploy's status events (`?wait=`) and of 16 deploys' two types, a hub's read of every event
 *    near the head, a page of 500 of every event from the first, a stream of one deploy's events, a
 *    tenant's events near the head, and a type's from the first.
 *
 * Run: node --import tsx bench/event-log.ts [--deploys 20000] [--reads 300] [--one-by-one 3000] [--ref COMMIT]
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { TestPostgres } from "../test/support/postgres.js";
import { serverBin, startServer } from "../test/support/server-process.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { databasePool, pipelinedTransaction, type Statement } from "../src/storage/database-pool.js";
import { cpuSeconds } from "./support/process-cpu.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    deploys: { type: "string", default: "20000" },
    reads: { type: "string", default: "300" },
    "one-by-one": { type: "string", default: "3000" },
    ref: { type: "string" },
  },
});
const deploys = Number(opts.deploys);
const reads = Number(opts.reads);
const oneByOne = Number(opts["one-by-one"]);

const postgres = await TestPostgres.start();
const results: Record<string, Record<string, string>> = {};
const machine = watchMachine();
try {
  if (opts.ref) {
    const ref = await checkoutRef(opts.ref);
    try {
      results[opts.ref] = await measure(ref.bin);
    } finally {
      await ref.remove();
    }
  }
  results.this = await measure(serverBin);
} finally {
  await postgres.stop();
}
const labels = Object.keys(results);
console.log(`${deploys} no-op deploys;`.padEnd(58) + labels.map((l) => l.padStart(12)).join(""));
for (const k of Object.keys(results.this!)) console.log(k.padEnd(58) + labels.map((l) => (results[l]![k] ?? "-").padStart(12)).join(""));

async function measure(bin: string): Promise<Record<string, string>> {
  const ws = await createWorkspace("manent-event-log-");
  const url = await postgres.createDatabase({ empty: true });
  const server = await startServer(await ws.write("manent.yml", manentYml(url, {})), {
    cwd: ws.dir,
    bin,
    env: { MANENT_LOG_LEVEL: "warn" },
  });
  await server.stop();
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const out: Record<string, string> = {};
  try {
    const t0 = performance.now();
    await db.query(`insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request)
      select 'd' || i, 'deploy', 'tenant-' || (i % 50), 'app-' || (i % 500), 'app-' || (i % 500), 'prod', '1.0.' || i, 'queued', '{}'::jsonb
      from generate_series(1, ${deploys}) i`);
    await db.query(`update manent.deploys set status = 'running', plugin = 'noop', started_at = now()`);
    for (const [seq, name] of ["resolve", "fetch", "validate", "checkpoint", "deploy"].entries()) {
      await db.query(`insert into manent.deploy_steps (deploy_id, seq, name, status, attempts, started_at)
        select id, ${seq + 1}, '${name}', 'running', 1, now() from manent.deploys`);
      if (name === "deploy")
        await db.query(`insert into manent.deploy_targets (deploy_id, phase, host, status, duration_ms, details, updated_at)
          select id, 'deploy', 'host-1', 'deployed', 0, '{"version": "1.0.1"}', now() from manent.deploys`);
      await db.query(`update manent.deploy_steps set status = 'succeeded', finished_at = now(), duration_ms = 1, outcome = 'succeeded',
          output = '{"result": "{}"}' where name = '${name}'`);
    }
    await db.query(`update manent.deploys set status = 'succeeded', finished_at = now()`);
    out["seconds to write"] = ((performance.now() - t0) / 1000).toFixed(1);
    await db.query("vacuum analyze");
    const bytes = async (tables: string[]) =>
      (await db.query<{ b: string }>(`select sum(pg_total_relation_size(t::regclass))::text as b from unnest($1::text[]) t`, [tables]))
        .rows[0]!.b;
    out["bytes per deploy: manent.events"] = (Number(await bytes(["manent.events"])) / deploys).toFixed(0);
    out["bytes per deploy: the log and the deploy's tables"] = (
      Number(await bytes(["manent.events", "manent.deploys", "manent.deploy_steps", "manent.deploy_targets"])) / deploys
    ).toFixed(0);
    Object.assign(out, await writeOneByOne(url));

    const log = (await db.query("select to_regclass('manent.event_log') is not null as v")).rows[0].v
      ? { from: "manent.event_log e", data: "e.data" }
      : { from: "manent.events e", data: "manent.event_data(e.type, e.deploy_id, e.data)" };
    const head = Number((await db.query<{ m: string }>(`select max(id)::text as m from ${log.from}`)).rows[0]!.m);
    const timed = async (label: string, sql: string, args: unknown[]) => {
      for (let i = 0; i < reads; i++) await db.query(sql, args);
      const t = performance.now();
      for (let i = 0; i < reads; i++) await db.query(sql, args);
      out[`ms per read: ${label}`] = ((performance.now() - t) / reads).toFixed(3);
    };
    const hub = "select * from manent.read_events_matching($1, 500, $2, $3, '{}', $4, $5)";
    await timed("a hub, one deploy's status (?wait=)", hub, [head - 50, false, [], [`d${deploys - 10}`], ["deploy.status"]]);
    await timed("a hub, 16 deploys' two types", hub, [
      head - 50,
      false,
      [],
      Array.from({ length: 16 }, (_, i) => `d${deploys - 10 - i}`),
      ["deploy.status", "deploy.created"],
    ]);
    await timed("a hub, every event near the head (20)", hub, [head - 20, true, [], [], []]);
    await timed("a hub, a page of every event from the first", hub, [0, true, [], [], []]);
    const placed = (where: string) =>
      `select e.id, e.at, e.tenant, e.deploy_id, e.type, ${log.data} as data, d.application
       from ${log.from} left join manent.deploys d on d.id = e.deploy_id where e.id > $1 and e.id <= $2 and ${where} order by e.id limit 500`;
    await timed("a stream of one deploy's events, from the first", placed("e.deploy_id = $3"), [0, head, `d${deploys / 2}`]);
    await timed("a stream of a tenant's events near the head", placed("e.tenant = $3"), [head - 5000, head, "tenant-7"]);
    await timed("a stream of a type's events, from the first", placed("e.type = $3"), [0, head, "deploy.status"]);
  } finally {
    await db.end();
  }
  return out;
}

/**
 * `--one-by-one` deploys, each written as the engine commits a no-op deploy's changes (11
 * transactions that write events), one after another. The reads below run over these too: a
 * little more log (an eighth of the default's deploys), the same for both sides.
 */
async function writeOneByOne(url: string): Promise<Record<string, string>> {
  if (oneByOne <= 0) return {};
  // The server's own pool and transactions (database-pool.ts): statements named, each transaction
  // one write. One connection, so that its backend's CPU is the deploys'.
  const pool = databasePool({ connectionString: url, max: 1 });
  try {
    return await timeOneByOne(pool);
  } finally {
    await pool.end();
  }
}

async function timeOneByOne(pool: pg.Pool): Promise<Record<string, string>> {
  const pid = (await pool.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
  const steps = ["resolve", "fetch", "validate", "checkpoint", "deploy"];
  const tx = (statements: Statement[]) => pipelinedTransaction(pool, statements);
  const start = (id: string, seq: number): Statement => ({
    sql: `insert into manent.deploy_steps (deploy_id, seq, name, status, attempts, started_at) values ($1, $2, $3, 'running', 1, now())`,
    params: [id, seq + 1, steps[seq]],
  });
  const end = (id: string, seq: number): Statement => ({
    sql: `update manent.deploy_steps set status = 'succeeded', finished_at = now(), duration_ms = 1, outcome = 'succeeded',
         output = '{"result": "{}"}' where deploy_id = $1 and name = $2`,
    params: [id, steps[seq]],
  });
  const write = async (i: number) => {
    const id = `one-${i}`;
    const one = (sql: string, ...params: unknown[]): Statement => ({ sql, params: [id, ...params] });
    await tx([
      one(
        `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request)
         values ($1, 'deploy', 'tenant-' || ($2::int % 50), 'one-' || ($2::int % 500), 'one-' || ($2::int % 500), 'prod', '1.0.' || $2, 'queued', '{}')`,
        i,
      ),
    ]);
    await tx([one(`update manent.deploys set status = 'running', plugin = 'noop', started_at = now() where id = $1`)]);
    await tx([start(id, 0)]);
    for (let seq = 0; seq < steps.length; seq++) {
      const next = seq + 1 < steps.length ? [start(id, seq + 1)] : [];
      if (steps[seq] === "deploy")
        await tx([
          one(`insert into manent.deploy_targets (deploy_id, phase, host, status, duration_ms, details, updated_at)
             values ($1, 'deploy', 'host-1', 'deployed', 0, '{"version": "1.0.1"}', now())`),
        ]);
      await tx([end(id, seq), ...next]);
    }
    await tx([one(`update manent.deploys set status = 'succeeded', finished_at = now() where id = $1`)]);
  };
  for (let i = 0; i < Math.min(200, oneByOne); i++) await write(-1 - i); // warm-up: plans cached, the backend's caches filled
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  for (let i = 0; i < oneByOne; i++) await write(i);
  const ms = performance.now() - t0;
  const cpu = cpuSeconds(pid) - cpu0;
  return {
    [`one by one (${oneByOne}): backend CPU ms per deploy`]: ((cpu * 1000) / oneByOne).toFixed(3),
    [`one by one (${oneByOne}): ms per deploy`]: (ms / oneByOne).toFixed(2),
  };
}
machine.report();
