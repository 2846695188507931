/**
 * Issue 24, item 3: throughput of one server and of a fleet. 100 applications deploy at once (each
 * one no-op target; a client loop per application submits a deploy, waits for its end, submits the
 * next), against 1, then 2, then 3 `manent-server`s sharing one real Postgres (as
 * docs/operations/several-servers.md sets them up: one database, an executor_id each; submissions
 * go round robin). Each fleet gets a fresh database, a warm-up, then `--seconds` of measurement:
 *  - deploys/s: deploys that finished (succeeded) in the window;
 *  - Postgres transactions per deploy: pg_stat_database's xact_commit delta of the database over the
 *    window (every server's commits: DBOS's checkpoints, manent's records, queue polls), per deploy;
 *  - the event log's append lock: pg_stat_activity sampled every 50 ms, the mean number of backends
 *    waiting on an advisory lock (and on any lock), and the share of samples with one waiting.
 * `--no-append-lock` runs the same after replacing, in each fresh database, the event functions by
 * ones that take no advisory lock (a measurement only: without it, ids can become visible out of
 * order), to see what the lock costs.
 *
 * Run: node --import tsx bench/throughput.ts [--apps 100] [--servers 1,2,3] [--seconds 20] [--warmup 5]
 *        [--no-append-lock] [--json]
 */
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import pg from "pg";
import { ApiClient } from "../src/cli/api-client.js";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";

const { values: opts } = parseArgs({
  options: {
    apps: { type: "string", default: "100" },
    servers: { type: "string", default: "1,2,3" },
    seconds: { type: "string", default: "20" },
    warmup: { type: "string", default: "5" },
    "no-append-lock": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  },
});
const apps = Number(opts.apps);
const fleets = opts.servers.split(",").map(Number);
const seconds = Number(opts.seconds);
const warmup = Number(opts.warmup);

const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
for (let i = 0; i < apps; i++)
  await ws.write(`envconfig/untenanted/app${i}/app${i}/bench.yml`, { plugin: "noop", targets: [{ host: `h${i}` }] });

const median = (xs: number[]): number => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : Number.NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pgServer = await TestPostgres.start();

interface FleetFigures {
  servers: number;
  append_lock: boolean;
  deploys: number;
  deploys_per_s: number;
  xact_commit_per_deploy: number;
  advisory_lock_waiters_mean: number;
  lock_waiters_mean: number;
  samples_with_advisory_waiter_pct: number;
  failed: number;
  queued_ms_p50: number;
  running_ms_p50: number;
  load_average: number;
}

/** The event functions of events-schema.ts without their advisory lock (bench only: ids may then become visible out of order). */
async function dropAppendLock(client: pg.Client): Promise<void> {
  const fns = await client.query<{ oid: number; def: string }>(
    `select p.oid, pg_get_functiondef(p.oid) as def from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'manent' and p.prokind = 'f' and pg_get_functiondef(p.oid) like '%pg_advisory_xact_lock(%'`,
  );
  for (const f of fns.rows) await client.query(f.def.replace(/perform pg_advisory_xact_lock\(\d+\);/g, ""));
}

async function runFleet(n: number, appendLock: boolean): Promise<FleetFigures> {
  const databaseUrl = await pgServer.createDatabase();
  const servers: ServerProcess[] = [];
  const admin = new pg.Client(databaseUrl);
  await admin.connect();
  try {
    for (let i = 0; i < n; i++) {
      const config = await ws.write(
        `server-${n}-${appendLock}-${i}.yml`,
        manentYml(undefined, {
          dbos: { database_url: databaseUrl, executor_id: `bench-${i}` },
          workdir: `./work-${n}-${appendLock}-${i}`,
          concurrency: apps,
        }),
      );
      servers.push(await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } }));
    }
    if (!appendLock) await dropAppendLock(admin);
    const clients = servers.map((s) => new ApiClient(s.url, undefined));
    let measuring = false;
    let stop = false;
    let done = 0;
    let failed = 0;
    let version = 0;
    const queued: number[] = [];
    const running: number[] = [];
    const loop = async (app: number): Promise<void> => {
      for (let k = 0; !stop; k++) {
        const api = clients[(app + k) % clients.length]!;
        const { id } = await api.submit({
          descriptor: descriptor(`app${app}`, "bench", artifact, `1.0.${++version}`),
          descriptor_file: "bench",
        });
        let d = await api.deploy(id, 60);
        while (d.status === "queued" || d.status === "running") d = await api.deploy(id, 60);
        if (!measuring) continue;
        if (d.status === "succeeded") done++;
        else failed++;
        queued.push(Date.parse(d.started_at!) - Date.parse(d.created_at));
        running.push(Date.parse(d.finished_at!) - Date.parse(d.started_at!));
      }
    };
    const loops = Array.from({ length: apps }, (_, i) => loop(i));
    await sleep(warmup * 1000);

    const commits = async () =>
      Number(
        (await admin.query<{ c: string }>("select xact_commit::text as c from pg_stat_database where datname = current_database()"))
          .rows[0]!.c,
      );
    // pg_stat_database is updated by each backend at most every PGSTAT_MIN_INTERVAL: flushed before each read.
    await admin.query("select pg_stat_force_next_flush()").catch(() => undefined);
    const c0 = await commits();
    measuring = true;
    const t0 = performance.now();
    let samples = 0;
    let advisory = 0;
    let anyLock = 0;
    let withAdvisory = 0;
    const sampler = (async () => {
      while (measuring) {
        const r = await admin.query<{ advisory: string; locks: string }>(
          `select count(*) filter (where wait_event_type = 'Lock' and wait_event = 'advisory')::text as advisory,
                  count(*) filter (where wait_event_type = 'Lock')::text as locks
           from pg_stat_activity where datname = current_database()`,
        );
        samples++;
        advisory += Number(r.rows[0]!.advisory);
        anyLock += Number(r.rows[0]!.locks);
        if (Number(r.rows[0]!.advisory) > 0) withAdvisory++;
        await sleep(50);
      }
    })();
    await sleep(seconds * 1000);
    measuring = false;
    const elapsed = (performance.now() - t0) / 1000;
    const finished = done;
    await sampler;
    await sleep(1000); // statistics are flushed by each backend within a second
    const c1 = await commits();
    stop = true;
    await Promise.allSettled(loops);
    const figures: FleetFigures = {
      servers: n,
      append_lock: appendLock,
      deploys: finished,
      deploys_per_s: Math.round((finished / elapsed) * 10) / 10,
      xact_commit_per_deploy: Math.round(((c1 - c0) / Math.max(1, finished)) * 10) / 10,
      advisory_lock_waiters_mean: Math.round((advisory / Math.max(1, samples)) * 100) / 100,
      lock_waiters_mean: Math.round((anyLock / Math.max(1, samples)) * 100) / 100,
      samples_with_advisory_waiter_pct: Math.round((withAdvisory / Math.max(1, samples)) * 1000) / 10,
      failed,
      queued_ms_p50: median(queued),
      running_ms_p50: median(running),
      load_average: loadavg()[0]!,
    };
    console.log(
      `${n} server(s)${appendLock ? "" : " (event append lock removed)"}: ${figures.deploys_per_s} deploys/s (${finished} in ${elapsed.toFixed(1)} s, ${failed} failed), ` +
        `${figures.xact_commit_per_deploy} Postgres commits per deploy; backends waiting on an advisory lock: ${figures.advisory_lock_waiters_mean} on average ` +
        `(${figures.samples_with_advisory_waiter_pct}% of samples), on any lock ${figures.lock_waiters_mean} (load ${figures.load_average.toFixed(1)}); ` +
        `median per deploy: ${figures.queued_ms_p50} ms queued, ${figures.running_ms_p50} ms running`,
    );
    return figures;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await admin.end();
  }
}

const results: FleetFigures[] = [];
try {
  for (const n of fleets) {
    results.push(await runFleet(n, true));
    if (opts["no-append-lock"]) results.push(await runFleet(n, false));
  }
} finally {
  await pgServer.stop();
}
if (opts.json) {
  const key = (f: FleetFigures) => `${f.servers}_server${f.servers > 1 ? "s" : ""}${f.append_lock ? "" : "_no_lock"}`;
  console.log(JSON.stringify({ bench: "throughput", apps, seconds, fleets: Object.fromEntries(results.map((f) => [key(f), f])) }));
}
