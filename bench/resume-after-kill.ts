/**
 * Resume after `kill -9` (issue 11): 50 deploys in flight on a real manent-server (noop plugin, 4 slow
 * targets each, their deploy steps running and some targets done), the server SIGKILLed and started
 * again on the same Postgres. Measured from the moment the new server listens ("ready"):
 *  - each deploy's next step: the first step attempt that starts after ready (the deploy step cut
 *    by the kill, started again by DBOS recovery), as the `step.started` event's time in Postgres;
 *  - every deploy finished (succeeded), and how many targets done before the kill were sent to the
 *    plugin again (per-target resume sends none but those in flight at the kill).
 * Also the restart itself: process start to listening (`ready_ms`).
 * Postgres is a separate one (as with several servers), so the kill leaves it running.
 * Run: node --import tsx bench/resume-after-kill.ts [deploys] [--json]
 * With --json the last stdout line is one JSON object of the figures (bench/table.ts reads it).
 */
import pg from "pg";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { readJournal } from "../test/support/journal.js";
import { TestPostgres } from "../test/support/postgres.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const json = process.argv.includes("--json");
const count = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 50);
const targetsPer = 4;

const postgres = await TestPostgres.start();
const databaseUrl = await postgres.createDatabase({ empty: true });
const ws = await createWorkspace("manent-bench-resume-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(databaseUrl, { concurrency: count }));
const apps = Array.from({ length: count }, (_, i) => `resume-${i}`);
for (const app of apps) {
  await ws.write(`envconfig/untenanted/${app}/${app}/bench.yml`, {
    plugin: "noop",
    targets: Array.from({ length: targetsPer }, (_, t) => ({ host: `${app}-${t}` })),
    parallel: 1,
    params: { state_dir: ws.path("state"), journal: ws.path("journal"), journal_targets: "true", delay: "1500ms" },
  });
}

const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
db.on("error", (err) => console.error(`bench database client: ${err.message}`));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
let server: ServerProcess | undefined;
const machine = watchMachine();
try {
  server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
  const ids = await Promise.all(
    apps.map(
      async (app) => (await server!.api.submit({ descriptor: descriptor(app, "bench", artifact, "1.0.0"), descriptor_file: "bench" })).id,
    ),
  );

  // In flight: every deploy's deploy step running, with at least one target done.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await db.query<{ n: string }>(
      `select count(distinct s.deploy_id)::text as n from manent.deploy_steps s
       where s.deploy_id = any($1) and s.name = 'deploy' and s.status = 'running'
         and exists (select 1 from manent.deploy_targets t where t.deploy_id = s.deploy_id and t.status = 'deployed')`,
      [ids],
    );
    if (Number(rows[0]!.n) === ids.length) break;
    if (Date.now() > deadline) throw new Error(`only ${rows[0]!.n} of ${ids.length} deploys reached their deploy step`);
    await sleep(50);
  }
  await server.kill();
  const before = await readJournal(ws.path("journal"));
  const doneBefore = new Set(before.filter((j) => j.call === "deploy_target").map((j) => j.hosts[0]!));
  const callsBefore = before.length;

  const started = Date.now();
  server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
  const ready = Date.now();

  // Each deploy's first step attempt started after ready, by the Postgres clock (same machine).
  const next = new Map<string, number>();
  while (next.size < ids.length) {
    const { rows } = await db.query<{ deploy_id: string; at: Date }>(
      `select deploy_id, min(at) as at from manent.events
       where deploy_id = any($1) and type = 'step.started' and at >= to_timestamp($2 / 1000.0) group by deploy_id`,
      [ids, ready],
    );
    for (const r of rows) next.set(r.deploy_id, r.at.getTime() - ready);
    if (Date.now() - ready > 120_000) throw new Error(`${ids.length - next.size} deploys did not resume within 120 s`);
    if (next.size < ids.length) await sleep(20);
  }
  const deploys = await Promise.all(ids.map((id) => server!.api.deploy(id, 300)));
  const finished = Math.max(...deploys.map((d) => Date.parse(d.finished_at!))) - ready;
  const failed = deploys.filter((d) => d.status !== "succeeded");
  if (failed.length) throw new Error(`${failed.length} deploys did not succeed: ${failed.map((d) => `${d.id} ${d.status}`).join(", ")}`);
  const after = (await readJournal(ws.path("journal"))).slice(callsBefore);
  const sentAgain = after.filter((j) => j.call === "deploy").flatMap((j) => j.hosts.filter((h) => doneBefore.has(h))).length;

  const resumed = [...next.values()];
  const figures = {
    bench: "resume-after-kill",
    deploys: ids.length,
    targets_done_before_kill: doneBefore.size,
    ready_ms: ready - started,
    next_step_ms_p50: median(resumed),
    all_resumed_ms: Math.max(...resumed),
    all_finished_ms: finished,
    targets_sent_again: sentAgain,
  };
  console.log(`${ids.length} deploys in flight (${targetsPer} targets of 1.5 s each), kill -9, restart on the same Postgres:`);
  console.log(`  restart -> listening (ready)            ${figures.ready_ms} ms`);
  console.log(`  ready -> a deploy's next step           median ${figures.next_step_ms_p50} ms, max ${figures.all_resumed_ms} ms`);
  console.log(`  ready -> every deploy finished          ${figures.all_finished_ms} ms`);
  console.log(`  targets done before the kill: ${doneBefore.size}, sent to the plugin again: ${sentAgain}`);
  const share = machine.report();
  if (json) console.log(JSON.stringify({ ...figures, ...share }));
} finally {
  await server?.stop();
  await db.end();
  await postgres.stop();
}
