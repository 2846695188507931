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
 *    waiting on an advisory lock (and on any lock), and the share of samples with one waiting; and the
 *    database's active backends by what they wait on (a lock, WAL, I/O; "cpu" when nothing);
 *  - CPU per deploy of the servers' processes and of Postgres's (from /proc): what holds when the
 *    machine's other work makes the deploys/s move between runs;
 *  - the servers' system calls and context switches, and Postgres's, per deploy; the backends
 *    connected; the event log's NOTIFYs per deploy (each wakes every LISTENing backend: two a server);
 *  - for a fleet, the share of deploys that another server ran than the one whose API took them.
 * The warm-up is 30 s by default: each server's V8 compiles its hot code on its own, and a server of
 * three gets a third of the calls, so a 5 s warm-up put part of the fleet's compiling in the window.
 * `--ref <commit>` runs each fleet a second time with the servers of that commit (checked out in a
 * temporary git worktree, its dist/ built there), side by side in one run: e.g. the last commit
 * whose event appends took one advisory lock for the whole database (3acb6f9), to see what it cost.
 *
 * Run: node --import tsx bench/throughput.ts [--apps 100] [--servers 1,2,3] [--seconds 20] [--warmup 30]
 *        [--ref <commit>] [--json] [--cpu-prof DIR] [--pin] [--tally] [--async-commit] [--connections N] [--perf DIR]
 * `--cpu-prof DIR`: each server writes a V8 CPU profile of its run into DIR/<n>-servers/ (ref-<n>-servers/ for --ref's).
 * `--pin`: the servers on one CPU, Postgres and the bench on the others (see pinCpus).
 * `--async-commit`: each fleet's database with `synchronous_commit = off`, so no commit waits for the
 * disk's flush of the WAL (the default, durable commits, is how the product runs): what a deploy
 * costs in CPU bounds the deploys/s, whatever the disk does that day.
 * `--connections N`: each server's `dbos.connections` (a --ref older than the setting refuses it).
 * `--perf DIR`: the whole machine's CPU samples of each fleet's window (`perf record -a`) into
 * DIR/<n>-servers.data, the servers with --perf-basic-prof; the bench prints the CPU per deploy by
 * program and kind of code (bench/support/perf-breakdown.ts). perf's own cost lowers the deploys/s.
 * `--tally`: the servers run unbundled with bench/support/statement-tally.cjs, and the bench prints
 * the statements the fleet sent per deploy in the window (as bench/deploy-commits.ts does for one server).
 */
import { execFileSync } from "node:child_process";
import { cpus as cpuList, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { ApiClient } from "../src/cli/api-client.js";
import { TestPostgres } from "../test/support/postgres.js";
import { serverBin, startServer, type ServerProcess } from "../test/support/server-process.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { databaseCounters } from "./support/database-counters.js";
import { cpuProfileEnv } from "./support/cpu-profile-env.js";
import { perfBreakdown, perfRecord } from "./support/perf-breakdown.js";
import { contextSwitchWindow, cpuWindow, postgresProcesses, syscallWindow } from "./support/process-cpu.js";
import { machineShareWindow, othersWarnPct } from "./support/machine-share.js";
import { readTally, resetTally, sumTallies, tallied } from "./support/statement-tally.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { eventsChannel } from "../src/storage/events-schema.js";

const { values: opts } = parseArgs({
  options: {
    apps: { type: "string", default: "100" },
    servers: { type: "string", default: "1,2,3" },
    seconds: { type: "string", default: "20" },
    warmup: { type: "string", default: "30" },
    ref: { type: "string" },
    json: { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
    pin: { type: "boolean", default: false },
    tally: { type: "boolean", default: false },
    "async-commit": { type: "boolean", default: false },
    connections: { type: "string" },
    perf: { type: "string" },
  },
});
// Each works through the servers' NODE_OPTIONS, and a profile of tallied servers would time the tally's hooks too.
if ([opts["cpu-prof"], opts.tally, opts.perf].filter(Boolean).length > 1)
  throw new Error("--cpu-prof, --tally and --perf cannot be combined: run them separately");
if (opts.perf) {
  try {
    execFileSync("perf", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("--perf needs perf (Debian's linux-perf) on the PATH");
  }
}
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

/**
 * `--pin`: the servers on the first CPU, Postgres (its postmaster, so the backends it forks later
 * too) and the bench on the others, the same in every fleet: the servers get one CPU however many
 * there are, so what a fleet costs beyond one server is not hidden by the CPUs it takes from Postgres.
 */
function pinCpus(serverPids: number[], postgresPids: number[]): void {
  const cpus = cpuList().length; // not availableParallelism(): the bench itself is pinned after the first fleet
  if (cpus < 2) throw new Error("--pin needs two CPUs or more");
  const rest = `1-${cpus - 1}`;
  for (const pid of serverPids) execFileSync("taskset", ["-a", "-p", "-c", "0", String(pid)], { stdio: "ignore" });
  for (const pid of [...postgresPids, process.pid]) execFileSync("taskset", ["-a", "-p", "-c", rest, String(pid)], { stdio: "ignore" });
}

interface FleetFigures {
  servers: number;
  /** The commit whose servers ran (--ref), or undefined: this checkout. */
  ref: string | undefined;
  deploys: number;
  deploys_per_s: number;
  xact_commit_per_deploy: number;
  advisory_lock_waiters_mean: number;
  lock_waiters_mean: number;
  samples_with_advisory_waiter_pct: number;
  /** The mean number of the database's active backends by what they wait on (pg_stat_activity's wait_event_type:wait_event; "cpu": none). */
  active_backends_by_wait: Record<string, number>;
  /** Connections opened to the database in the window (the pools close one after 10 s unused). */
  sessions_opened: number;
  /** The mean number of the database's backends (the servers' connections, idle or not). */
  backends_mean: number;
  failed: number;
  queued_ms_p50: number;
  running_ms_p50: number;
  load_average: number;
  /** The whole machine's CPUs in the window, percent of their time: busy (anything), idle, idle waiting for I/O, stolen by the hypervisor. */
  machine_cpu_pct: { busy: number; idle: number; iowait: number; steal: number };
  /**
   * The machine's busy share outside the bench and every process it started (its servers, Postgres,
   * perf): the kernel's own threads and any other program (machine-share.ts). More than a few
   * percent, and the figures are another program's too.
   */
  others_cpu_pct: number;
  /** CPU time per deploy finished in the window: the servers' processes, and Postgres's (postmaster and backends). */
  server_cpu_ms_per_deploy: number;
  postgres_cpu_ms_per_deploy: number;
  /** The bench's own process (its clients' requests): CPU the servers and Postgres did not get. */
  bench_cpu_ms_per_deploy: number;
  server_writes_per_deploy: number;
  server_reads_per_deploy: number;
  /** The event log's NOTIFYs (manent_events) per deploy. */
  notifies_per_deploy: number;
  /** Of the window's deploys, the share (%) that a server other than the one whose API took it ran (DBOS's executor). */
  ran_elsewhere_pct: number;
  /** Context switches per deploy: the servers' (every thread's) waits and preemptions, and Postgres's. */
  server_voluntary_switches_per_deploy: number;
  server_involuntary_switches_per_deploy: number;
  postgres_voluntary_switches_per_deploy: number;
  postgres_involuntary_switches_per_deploy: number;
  /** With --perf: the machine's CPU in the window per deploy (ms), by program and kind of code (perf-breakdown.ts). */
  perf_ms_per_deploy?: Record<string, number>;
}

async function runFleet(n: number, ref?: { name: string; bin: string }): Promise<FleetFigures> {
  const tag = `${n}-${ref?.name ?? "head"}`;
  const databaseUrl = await pgServer.createDatabase({ empty: true });
  const servers: ServerProcess[] = [];
  const admin = new pg.Client(databaseUrl);
  await admin.connect();
  // Commits that do not wait for the WAL's flush: what a deploy costs in CPU, whatever the disk's
  // flush takes that day (set before the servers connect: a session reads it at its start).
  if (opts["async-commit"]) await admin.query(`alter database "${new URL(databaseUrl).pathname.slice(1)}" set synchronous_commit = off`);
  try {
    for (let i = 0; i < n; i++) {
      const config = await ws.write(
        `server-${tag}-${i}.yml`,
        manentYml(undefined, {
          dbos: {
            database_url: databaseUrl,
            executor_id: `bench-${i}`,
            ...(opts.connections !== undefined && { connections: Number(opts.connections) }),
          },
          workdir: `./work-${tag}-${i}`,
          concurrency: apps,
        }),
      );
      const profile = opts["cpu-prof"]
        ? await cpuProfileEnv(join(opts["cpu-prof"], `${ref ? "ref-" : ""}${n}-servers`))
        : opts.perf
          ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --perf-basic-prof`.trim() }
          : {};
      const bin = ref?.bin ?? serverBin;
      const counted = opts.tally ? tallied(bin) : { bin, env: {} };
      servers.push(
        await startServer(config, { cwd: ws.dir, bin: counted.bin, env: { MANENT_LOG_LEVEL: "warn", ...profile, ...counted.env } }),
      );
    }
    const port = Number(new URL(databaseUrl).port);
    if (opts.pin)
      pinCpus(
        servers.map((s) => s.child.pid!),
        postgresProcesses(port),
      );
    const clients = servers.map((s) => new ApiClient(s.url, undefined));
    let measuring = false;
    let stop = false;
    let done = 0;
    let failed = 0;
    let version = 0;
    const queued: number[] = [];
    /** Which server's API took each deploy of the window (its executor id), to compare with the one that ran it. */
    const acceptedBy = new Map<string, string>();
    const running: number[] = [];
    const loop = async (app: number): Promise<void> => {
      for (let k = 0; !stop; k++) {
        const api = clients[(app + k) % clients.length]!;
        const { id } = await api.submit({
          descriptor: descriptor(`app${app}`, "bench", artifact, `1.0.${++version}`),
          descriptor_file: "bench",
        });
        if (measuring) acceptedBy.set(id, `bench-${(app + k) % clients.length}`);
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

    // pg_stat_database is updated by each backend at most every PGSTAT_MIN_INTERVAL: flushed before each read.
    await admin.query("select pg_stat_force_next_flush()").catch(() => undefined);
    const c0 = await databaseCounters(admin);
    const serverCpu = cpuWindow(() => servers.map((s) => s.child.pid!));
    const serverCalls = syscallWindow(() => servers.map((s) => s.child.pid!));
    const serverSwitches = contextSwitchWindow(() => servers.map((s) => s.child.pid!));
    const postgresSwitches = contextSwitchWindow(() => postgresProcesses(port));
    const benchCpu = cpuWindow(() => [process.pid]);
    const postgresCpu = cpuWindow(() => postgresProcesses(port));
    const machineShare = machineShareWindow();
    if (opts.tally) for (const s of servers) resetTally(s.child.pid!);
    // The event log's NOTIFYs (events-schema.ts): each wakes every LISTENing backend of the database,
    // two per server (its event hub's and DBOS's) and this one, whatever their channels.
    let notifications = 0;
    admin.on("notification", (n) => {
      if (measuring && n.channel === eventsChannel) notifications++;
    });
    await admin.query(`listen ${eventsChannel}`);
    measuring = true;
    const t0 = performance.now();
    const perfFile = opts.perf && join(opts.perf, `${ref ? "ref-" : ""}${n}-servers.data`);
    const perf = perfFile ? perfRecord(perfFile, seconds) : undefined;
    perf?.catch(() => undefined); // awaited (and thrown) after the window
    let samples = 0;
    let advisory = 0;
    let anyLock = 0;
    let backends = 0;
    let withAdvisory = 0;
    const byWait = new Map<string, number>();
    const sampler = (async () => {
      while (measuring) {
        const r = await admin.query<{ advisory: string; locks: string; backends: string; waits: string[] | null }>(
          `select count(*)::text as backends,
                  count(*) filter (where wait_event_type = 'Lock' and wait_event = 'advisory')::text as advisory,
                  count(*) filter (where wait_event_type = 'Lock')::text as locks,
                  array_agg(coalesce(wait_event_type || ':' || wait_event, 'cpu')) filter (where state = 'active' and pid <> pg_backend_pid()) as waits
           from pg_stat_activity where datname = current_database()`,
        );
        samples++;
        advisory += Number(r.rows[0]!.advisory);
        anyLock += Number(r.rows[0]!.locks);
        backends += Number(r.rows[0]!.backends) - 1; // not the sampler's own
        if (Number(r.rows[0]!.advisory) > 0) withAdvisory++;
        for (const wait of r.rows[0]!.waits ?? []) byWait.set(wait, (byWait.get(wait) ?? 0) + 1);
        await sleep(50);
      }
    })();
    await sleep(seconds * 1000);
    measuring = false;
    const elapsed = (performance.now() - t0) / 1000;
    const finished = done;
    const serverSeconds = serverCpu.stop();
    const calls = serverCalls.stop();
    const switches = serverSwitches.stop();
    const pgSwitches = postgresSwitches.stop();
    const benchSeconds = benchCpu.stop();
    const postgresSeconds = postgresCpu.stop();
    const { machine, others_cpu_pct } = machineShare.stop();
    await perf;
    const statements = opts.tally ? sumTallies(await Promise.all(servers.map((s) => readTally(s.child.pid!)))) : undefined;
    await sampler;
    await sleep(1000); // statistics are flushed by each backend within a second
    const c1 = await databaseCounters(admin);
    stop = true;
    await Promise.allSettled(loops);
    const ran = await admin.query<{ workflow_uuid: string; executor_id: string }>(
      "select workflow_uuid, executor_id from dbos.workflow_status where workflow_uuid = any($1)",
      [[...acceptedBy.keys()]],
    );
    const elsewhere = ran.rows.filter((r) => acceptedBy.get(r.workflow_uuid) !== r.executor_id).length;
    const figures: FleetFigures = {
      servers: n,
      ref: ref?.name,
      deploys: finished,
      deploys_per_s: Math.round((finished / elapsed) * 10) / 10,
      xact_commit_per_deploy: Math.round(((c1.commits - c0.commits) / Math.max(1, finished)) * 10) / 10,
      sessions_opened: c1.sessions - c0.sessions,
      advisory_lock_waiters_mean: Math.round((advisory / Math.max(1, samples)) * 100) / 100,
      lock_waiters_mean: Math.round((anyLock / Math.max(1, samples)) * 100) / 100,
      samples_with_advisory_waiter_pct: Math.round((withAdvisory / Math.max(1, samples)) * 1000) / 10,
      active_backends_by_wait: Object.fromEntries(
        [...byWait].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, Math.round((v / Math.max(1, samples)) * 100) / 100]),
      ),
      backends_mean: Math.round((backends / Math.max(1, samples)) * 10) / 10,
      failed,
      queued_ms_p50: median(queued),
      running_ms_p50: median(running),
      load_average: loadavg()[0]!,
      machine_cpu_pct: { busy: machine.busy, idle: machine.idle, iowait: machine.iowait, steal: machine.steal },
      others_cpu_pct,
      server_cpu_ms_per_deploy: Math.round((serverSeconds * 10000) / Math.max(1, finished)) / 10,
      postgres_cpu_ms_per_deploy: Math.round((postgresSeconds * 10000) / Math.max(1, finished)) / 10,
      bench_cpu_ms_per_deploy: Math.round((benchSeconds * 10000) / Math.max(1, finished)) / 10,
      server_writes_per_deploy: Math.round((calls.writes * 10) / Math.max(1, finished)) / 10,
      server_reads_per_deploy: Math.round((calls.reads * 10) / Math.max(1, finished)) / 10,
      notifies_per_deploy: Math.round((notifications * 100) / Math.max(1, finished)) / 100,
      ran_elsewhere_pct: Math.round((elsewhere * 1000) / Math.max(1, ran.rows.length)) / 10,
      server_voluntary_switches_per_deploy: Math.round((switches.voluntary * 10) / Math.max(1, finished)) / 10,
      server_involuntary_switches_per_deploy: Math.round((switches.involuntary * 10) / Math.max(1, finished)) / 10,
      postgres_voluntary_switches_per_deploy: Math.round((pgSwitches.voluntary * 10) / Math.max(1, finished)) / 10,
      postgres_involuntary_switches_per_deploy: Math.round((pgSwitches.involuntary * 10) / Math.max(1, finished)) / 10,
      ...(perfFile && { perf_ms_per_deploy: await perfBreakdown(perfFile, finished) }),
    };
    console.log(
      `${n} server(s)${ref ? ` of ${ref.name}` : ""}: ${figures.deploys_per_s} deploys/s (${finished} in ${elapsed.toFixed(1)} s, ${failed} failed), ` +
        `${figures.xact_commit_per_deploy} Postgres commits per deploy; CPU per deploy: servers ${figures.server_cpu_ms_per_deploy} ms, ` +
        `Postgres ${figures.postgres_cpu_ms_per_deploy} ms (the bench's clients ${figures.bench_cpu_ms_per_deploy} ms); servers' system calls per deploy: ${figures.server_writes_per_deploy} writes, ` +
        `${figures.server_reads_per_deploy} reads; ${figures.notifies_per_deploy} NOTIFYs of the event log; ${figures.ran_elsewhere_pct}% run by another server than the one that took it; context switches per deploy (voluntary / involuntary): servers ` +
        `${figures.server_voluntary_switches_per_deploy} / ${figures.server_involuntary_switches_per_deploy}, Postgres ` +
        `${figures.postgres_voluntary_switches_per_deploy} / ${figures.postgres_involuntary_switches_per_deploy}; backends waiting on an advisory lock: ${figures.advisory_lock_waiters_mean} on average ` +
        `(${figures.samples_with_advisory_waiter_pct}% of samples), on any lock ${figures.lock_waiters_mean} (load ${figures.load_average.toFixed(1)}); ` +
        `the machine's CPUs ${machine.busy}% busy, ${machine.idle}% idle, ${machine.iowait}% waiting for I/O, ${machine.steal}% stolen, ${figures.others_cpu_pct}% in processes outside this bench; ` +
        `median per deploy: ${figures.queued_ms_p50} ms queued, ${figures.running_ms_p50} ms running; ` +
        `${figures.backends_mean} backends (${figures.sessions_opened} connections opened), active ones by wait: ` +
        (Object.entries(figures.active_backends_by_wait)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "none"),
    );
    if (figures.others_cpu_pct > othersWarnPct)
      console.log(
        `  warning: ${figures.others_cpu_pct}% of the CPUs went to other processes in the window: these figures are not this fleet's alone`,
      );
    if (figures.perf_ms_per_deploy) {
      console.log(`  the machine's CPU per deploy (ms; perf report -i ${perfFile}):`);
      for (const [kind, ms] of Object.entries(figures.perf_ms_per_deploy)) console.log(`  ${ms.toFixed(2).padStart(7)} ${kind}`);
    }
    if (statements) {
      const per = (count: number) => (count / Math.max(1, finished)).toFixed(2).padStart(7);
      console.log(`  the servers' statements per deploy (commits ${per(statements.commits).trim()}; a transaction as TX[…]):`);
      for (const [count, text] of statements.statements.slice(0, 25)) console.log(`  ${per(count)} ${text}`);
    }
    return figures;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await admin.end();
  }
}

const results: FleetFigures[] = [];
const reference = opts.ref === undefined ? undefined : await checkoutRef(opts.ref);
try {
  for (const n of fleets) {
    // The reference first, then this checkout, fleet by fleet: the machine's load drifts less between the two.
    if (reference) results.push(await runFleet(n, { name: opts.ref!, bin: reference.bin }));
    results.push(await runFleet(n));
  }
} finally {
  await pgServer.stop();
  await reference?.remove();
}
if (opts.json) {
  const key = (f: FleetFigures) => `${f.servers}_server${f.servers > 1 ? "s" : ""}${f.ref === undefined ? "" : "_ref"}`;
  console.log(
    JSON.stringify({ bench: "throughput", apps, seconds, ref: opts.ref, fleets: Object.fromEntries(results.map((f) => [key(f), f])) }),
  );
}
