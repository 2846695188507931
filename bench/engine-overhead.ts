/**
 * Orchestration overhead of the engine, on a real manent-server with the embedded Postgres and the
 * noop plugin (which does no work, so what is measured is manent's):
 *  1. one deploy to one target, 20 times in a row: median and p90 of submit → finished (queue
 *     dispatch included), of started → finished (the workflow's steps alone), and of the client's
 *     submit → its long poll answered with the end (what `manent deploy` waits);
 *  2. two deploys of one application submitted together, 10 times: from the first's end to the
 *     second's start (the handover of the partition);
 *  3. one deploy to 1,000 targets with `parallel: 50`: wall time.
 * Run: node --import tsx bench/engine-overhead.ts [runs] [--json] [--queries] [--cpu-prof DIR]
 *  --json      print one JSON object of the figures as the last stdout line
 *  --queries   log every statement Postgres runs (log_min_duration_statement = 0) and print, per
 *              one-target deploy, how many statements of each kind the server sent and their time
 *  --cpu-prof  write a V8 CPU profile of manent-server into DIR (open it in Chrome's DevTools)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { EmbeddedDatabase } from "../src/storage/embedded-postgres.js";
import type { DeployRecord } from "../src/core/engine/deploy-store.js";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { cpuProfileEnv } from "./support/cpu-profile-env.js";
import { watchMachine } from "./support/machine-share.js";

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: { json: { type: "boolean" }, queries: { type: "boolean" }, "cpu-prof": { type: "string" } },
});
const runs = Number(positionals[0] ?? 20);
const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
await ws.write("envconfig/untenanted/one/one/bench.yml", { plugin: "noop", targets: [{ host: "t0" }], params: {} });
await ws.write("envconfig/untenanted/fleet/fleet/bench.yml", {
  plugin: "noop",
  targets: Array.from({ length: 1000 }, (_, i) => ({ host: `t${i}` })),
  params: {},
  parallel: 50,
});

// With --queries the bench runs the Postgres itself, logging every statement with its duration.
const statements: { at: number; pid: string; ms: number; sql: string }[] = [];
let pgDir: string | undefined;
let db: EmbeddedDatabase | undefined;
if (flags.queries) {
  pgDir = await mkdtemp(join(tmpdir(), "manent-bench-pg-"));
  const capture = (_msg: string, f?: Record<string, unknown>): void => {
    const line = typeof f?.line === "string" ? f.line : "";
    const m = /^(\S+ \S+) \S+ \[(\d+)\] LOG:\s+duration: ([\d.]+) ms\s+(?:statement|execute [^:]*): (.*)$/.exec(line);
    if (m) statements.push({ at: Date.parse(m[1]!.replace(" ", "T") + "Z"), pid: m[2]!, ms: Number(m[3]), sql: m[4]! });
  };
  db = await EmbeddedDatabase.start(pgDir, { debug: capture, info() {}, warn() {}, error() {} });
  const admin = new pg.Client(db.url);
  await admin.connect();
  await admin.query(`alter system set log_min_duration_statement = 0`);
  await admin.query(`alter system set log_line_prefix = '%m [%p] '`);
  await admin.query(`alter system set log_timezone = 'UTC'`);
  await admin.query(`select pg_reload_conf()`);
  await admin.end();
}
const config = await ws.write("manent.yml", manentYml(db?.url));
const env: Record<string, string> = { MANENT_LOG_LEVEL: "warn" };
if (flags["cpu-prof"]) Object.assign(env, await cpuProfileEnv(flags["cpu-prof"]));

const ms = (a: string | null, b: string | null): number => Date.parse(b!) - Date.parse(a!);
const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

/** Waits for the end of a deploy through the API's long poll (at most 300 s a request). */
async function finished(server: ServerProcess, id: string, seconds: number): Promise<DeployRecord> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const d = await server.api.deploy(id, Math.min(300, Math.max(1, Math.ceil((deadline - Date.now()) / 1000))));
    if (["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status) || Date.now() >= deadline) return d;
  }
}

const server = await startServer(config, { cwd: ws.dir, env });
const figures: Record<string, number> = {};
const machine = watchMachine();
try {
  // A first deploy warms the plugin, the connection pools and the artifact cache.
  await finished(
    server,
    (await server.api.submit({ descriptor: descriptor("one", "bench", artifact, "0.0.0"), descriptor_file: "bench" })).id,
    60,
  );
  const total: number[] = [];
  const steps: number[] = [];
  const windows: [number, number][] = [];
  const walBefore = flags.queries ? await walStats() : undefined;
  for (let i = 1; i <= runs; i++) {
    const before = Date.now();
    const { id } = await server.api.submit({ descriptor: descriptor("one", "bench", artifact, `1.0.${i}`), descriptor_file: "bench" });
    const d = await finished(server, id, 60);
    if (d.status !== "succeeded") throw new Error(`deploy ${id} ${d.status}: ${d.error?.message}`);
    windows.push([before, Date.now()]);
    total.push(ms(d.created_at, d.finished_at));
    steps.push(ms(d.started_at, d.finished_at));
  }
  figures.deploy_submit_to_finished_ms_p50 = quantile(total, 0.5);
  figures.deploy_submit_to_finished_ms_p90 = quantile(total, 0.9);
  // What a client waits (`manent deploy`): from its submit to the long poll's answer with the end.
  const answered = windows.map(([from, to]) => to - from);
  figures.deploy_submit_to_answer_ms_p50 = quantile(answered, 0.5);
  figures.deploy_submit_to_answer_ms_p90 = quantile(answered, 0.9);
  figures.deploy_steps_ms_p50 = quantile(steps, 0.5);
  figures.deploy_steps_ms_p90 = quantile(steps, 0.9);
  console.log(`one deploy, 1 no-op target, ${runs} runs:`);
  console.log(
    `  submit -> finished   median ${figures.deploy_submit_to_finished_ms_p50} ms   p90 ${figures.deploy_submit_to_finished_ms_p90} ms`,
  );
  console.log(`  workflow steps only  median ${figures.deploy_steps_ms_p50} ms   p90 ${figures.deploy_steps_ms_p90} ms`);
  console.log(
    `  the client's submit -> its wait answered   median ${figures.deploy_submit_to_answer_ms_p50} ms   p90 ${figures.deploy_submit_to_answer_ms_p90} ms`,
  );
  if (flags.queries) {
    // The log lines and the statistics arrive a little after the statements: let them drain.
    await new Promise((r) => setTimeout(r, 1500));
    const walAfter = await walStats();
    figures.wal_syncs_per_deploy = Math.round(((walAfter.wal_sync - walBefore!.wal_sync) / runs) * 10) / 10;
    figures.commits_per_deploy = Math.round(((walAfter.xact_commit - walBefore!.xact_commit) / runs) * 10) / 10;
    console.log(
      `  WAL fsyncs per deploy ${figures.wal_syncs_per_deploy}, transactions committed per deploy ${figures.commits_per_deploy} (background included)`,
    );
    reportStatements(windows, figures);
  }

  // Two deploys of one application submitted together: the second waits for the first (one deploy
  // per partition); from the first's end to the second's start.
  const handover: number[] = [];
  for (let i = 1; i <= Math.min(runs, 10); i++) {
    const first = await server.api.submit({ descriptor: descriptor("one", "bench", artifact, `2.0.${i}`), descriptor_file: "bench" });
    const second = await server.api.submit({ descriptor: descriptor("one", "bench", artifact, `2.1.${i}`), descriptor_file: "bench" });
    const a = await finished(server, first.id, 60);
    const b = await finished(server, second.id, 60);
    if (a.status !== "succeeded" || b.status !== "succeeded") throw new Error(`queued pair ${a.status} ${b.status}`);
    handover.push(ms(a.finished_at, b.started_at));
  }
  figures.queued_next_start_ms_p50 = quantile(handover, 0.5);
  console.log(`two deploys of one application submitted together, ${handover.length} runs:`);
  console.log(`  first finished -> second started   median ${figures.queued_next_start_ms_p50} ms   p90 ${quantile(handover, 0.9)} ms`);

  const { id } = await server.api.submit({ descriptor: descriptor("fleet", "bench", artifact, "1.0.0"), descriptor_file: "bench" });
  const d = await finished(server, id, 600);
  if (d.status !== "succeeded") throw new Error(`fleet deploy ${d.status}: ${d.error?.message}`);
  const deployStep = d.steps.find((s) => s.name === "deploy")!;
  figures.fleet_1000_targets_ms = ms(d.created_at, d.finished_at);
  figures.fleet_1000_targets_deploy_step_ms = deployStep.duration_ms ?? NaN;
  console.log(`one deploy, 1,000 no-op targets, parallel 50:`);
  console.log(
    `  submit -> finished   ${figures.fleet_1000_targets_ms} ms   (deploy step ${deployStep.duration_ms} ms, ${d.targets.length} target records)`,
  );
} finally {
  await server.stop();
  await db?.stop();
  if (pgDir) await rm(pgDir, { recursive: true, force: true });
}
const share = machine.report();
if (flags.json) console.log(JSON.stringify({ ...share, bench: "engine-overhead", runs, ...figures }));

/** Postgres's counters of WAL fsyncs and committed transactions (every database). */
async function walStats(): Promise<{ wal_sync: number; xact_commit: number }> {
  const admin = new pg.Client(db!.url);
  await admin.connect();
  try {
    const wal = await admin.query<{ wal_sync: string }>(`select wal_sync from pg_stat_wal`);
    const xact = await admin.query<{ n: string }>(`select sum(xact_commit) as n from pg_stat_database`);
    return { wal_sync: Number(wal.rows[0]!.wal_sync), xact_commit: Number(xact.rows[0]!.n) };
  } finally {
    await admin.end();
  }
}

/** Statements run while the one-target deploys ran (background polls included), grouped by kind, per deploy. */
function reportStatements(windows: [number, number][], out: Record<string, number>): void {
  const inside = statements.filter((s) => windows.some(([a, b]) => s.at >= a && s.at <= b));
  const byKind = new Map<string, { n: number; ms: number }>();
  for (const s of inside) {
    const kind = s.sql.replace(/\s+/g, " ").replace(/\$\d+/g, "?").slice(0, 110);
    const k = byKind.get(kind) ?? { n: 0, ms: 0 };
    k.n += 1;
    k.ms += s.ms;
    byKind.set(kind, k);
  }
  const n = windows.length;
  if (process.env.BENCH_TIMELINE) {
    const [a, b] = windows[windows.length - 1]!;
    for (const s of statements.filter((x) => x.at >= a && x.at <= b))
      console.log(`      +${String(s.at - a).padStart(4)} [${s.pid}] ${s.ms.toFixed(2)} ${s.sql.slice(0, 100)}`);
  }
  const perDeploy = inside.length / n;
  out.statements_per_deploy = Math.round(perDeploy * 10) / 10;
  out.statement_ms_per_deploy = Math.round((inside.reduce((a, s) => a + s.ms, 0) / n) * 10) / 10;
  console.log(
    `  statements per deploy (server side, polls included): ${out.statements_per_deploy}, ${out.statement_ms_per_deploy} ms in Postgres`,
  );
  for (const [kind, k] of [...byKind].sort((a, b) => b[1].n - a[1].n)) {
    console.log(`    ${(k.n / n).toFixed(1).padStart(5)} x ${(k.ms / k.n).toFixed(2).padStart(6)} ms  ${kind}`);
  }
}
