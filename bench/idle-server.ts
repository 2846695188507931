/**
 * What an idle manent-server costs the machine: servers that run no deploy (started on a fresh
 * database, then left alone for `--settle` seconds: 70 by default, past the first minute in which
 * DBOS looks for new schedules every second instead of every 30 s), measured over `--seconds`:
 *  - CPU of the servers' processes and of Postgres's, in ms per second (from /proc);
 *  - the servers' main threads' wake-ups per second: their voluntary context switches, one each
 *    time the event loop sleeps in epoll and something (a timer, a socket) wakes it;
 *  - the database's commits per second (pg_stat_database's xact_commit).
 * A fleet's servers are idle most of the time, each at this cost. `--ref <commit>` runs that
 * commit's servers first, in the same run (bench/support/ref-checkout.ts).
 *
 * Run: node --import tsx bench/idle-server.ts [--servers 1] [--settle 70] [--seconds 20] [--ref <commit>] [--json]
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import pg from "pg";
import { TestPostgres } from "../test/support/postgres.js";
import { serverBin, startServer, type ServerProcess } from "../test/support/server-process.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { cpuWindow, mainThreadWakeWindow, postgresProcesses } from "./support/process-cpu.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { databaseCounters } from "./support/database-counters.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    servers: { type: "string", default: "1" },
    settle: { type: "string", default: "70" },
    seconds: { type: "string", default: "20" },
    ref: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const count = Number(opts.servers);
const settleSeconds = Number(opts.settle);
const seconds = Number(opts.seconds);

interface IdleFigures {
  server_cpu_ms_per_s: number;
  postgres_cpu_ms_per_s: number;
  main_thread_wakes_per_s: number;
  commits_per_s: number;
}

const ws = await createWorkspace("manent-bench-idle-");
const pgServer = await TestPostgres.start();

async function measure(label: string, bin: string): Promise<IdleFigures> {
  const databaseUrl = await pgServer.createDatabase({ empty: true });
  const servers: ServerProcess[] = [];
  const admin = new pg.Client(databaseUrl);
  await admin.connect();
  try {
    for (let i = 0; i < count; i++) {
      const config = await ws.write(
        `server-${label}-${i}.yml`,
        manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: `idle-${i}` }, workdir: `./work-${label}-${i}` }),
      );
      servers.push(await startServer(config, { cwd: ws.dir, bin, env: { MANENT_LOG_LEVEL: "warn" } }));
    }
    await sleep(settleSeconds * 1000);
    const pids = () => servers.map((s) => s.child.pid!);
    const port = Number(new URL(databaseUrl).port);
    const commits = async () => {
      // pg_stat_database is updated by each backend at most every PGSTAT_MIN_INTERVAL: flushed before each read.
      await admin.query("select pg_stat_force_next_flush()");
      return (await databaseCounters(admin)).commits;
    };
    const c0 = await commits();
    const serverWakes = mainThreadWakeWindow(pids);
    const serverCpu = cpuWindow(pids);
    const postgresCpu = cpuWindow(() => postgresProcesses(port));
    const t0 = performance.now();
    await sleep(seconds * 1000);
    const serverSeconds = serverCpu.stop();
    const postgresSeconds = postgresCpu.stop();
    const wakes = serverWakes.stop();
    const elapsed = (performance.now() - t0) / 1000;
    await sleep(1000); // what the servers committed in the window is flushed by their backends within a second
    const c1 = await commits();
    const round = (x: number) => Math.round(x * 10) / 10;
    const figures: IdleFigures = {
      server_cpu_ms_per_s: round((serverSeconds * 1000) / elapsed),
      postgres_cpu_ms_per_s: round((postgresSeconds * 1000) / elapsed),
      main_thread_wakes_per_s: round(wakes / elapsed),
      // The bench's own two reads of the counter are in it; each is its own transaction.
      commits_per_s: round((c1 - c0 - 2) / elapsed),
    };
    console.log(
      `${label}, ${count} idle server(s) over ${seconds} s: CPU ${figures.server_cpu_ms_per_s} ms/s (servers), ` +
        `${figures.postgres_cpu_ms_per_s} ms/s (Postgres); main threads woken ${figures.main_thread_wakes_per_s} times/s; ` +
        `${figures.commits_per_s} commits/s`,
    );
    return figures;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await admin.end();
  }
}

const results: Record<string, IdleFigures> = {};
const reference = opts.ref === undefined ? undefined : await checkoutRef(opts.ref);
const machine = watchMachine();
try {
  if (reference) results[opts.ref!] = await measure(opts.ref!, reference.bin);
  results.this = await measure("this checkout", serverBin);
} finally {
  await pgServer.stop();
  await reference?.remove();
}
const share = machine.report();
if (opts.json) console.log(JSON.stringify({ ...share, bench: "idle-server", servers: count, seconds, results }));
