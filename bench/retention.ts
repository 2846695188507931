/**
 * Issue 29, item 1 (and issue 31, item 2): what the database keeps per no-op deploy, and whether a
 * retention policy holds its size flat over a long run. One real `manent-server` on a real
 * Postgres; `--apps` applications deploy in parallel (a client loop each: submit, wait, submit).
 *  1. Without a policy: `--deploys` deploys; the database's growth per deploy (pg_database_size,
 *     after a VACUUM so free space is not counted) and the rows and bytes of each table per deploy.
 *  2. With `retention: {deploys: {keep_last: --keep}}` on a fresh database: `--rounds` rounds of
 *     `--deploys` deploys, a sweep (POST /api/v1/retention/sweep) after each; the database's size
 *     after each round. Flat from the second round on means the sweep keeps up.
 *
 * `--ref <commit>` runs part 1 a second time, first, with the server of that commit (checked out in a
 * temporary git worktree): what a deploy kept before and after, side by side in one run.
 *
 * Run: node --import tsx bench/retention.ts [--apps 20] [--deploys 1000] [--rounds 5] [--keep 10] [--ref <commit>] [--json]
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { watchMachine } from "./support/machine-share.js";

const machine = watchMachine();

const { values: opts } = parseArgs({
  options: {
    apps: { type: "string", default: "20" },
    deploys: { type: "string", default: "1000" },
    rounds: { type: "string", default: "5" },
    keep: { type: "string", default: "10" },
    ref: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const apps = Number(opts.apps);
const perRound = Number(opts.deploys);
const rounds = Number(opts.rounds);
const keep = Number(opts.keep);

const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
for (let i = 0; i < apps; i++)
  await ws.write(`envconfig/untenanted/app${i}/app${i}/bench.yml`, { plugin: "noop", targets: [{ host: `h${i}` }] });
const pgServer = await TestPostgres.start();

/** `count` deploys over the applications in parallel; resolves when all have ended. */
async function deployMany(server: ServerProcess, count: number, round: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: apps }, async (_, app) => {
      while (next < count) {
        const n = next++;
        const { id } = await server.api.submit({
          descriptor: descriptor(`app${app}`, "bench", artifact, `${round}.${n}.0`),
          descriptor_file: "bench.yml",
        });
        const d = await server.api.deploy(id, 120);
        if (d.status !== "succeeded") throw new Error(`deploy ${id} ${d.status}: ${JSON.stringify(d.error)}`);
      }
    }),
  );
}

async function sizes(db: pg.Client): Promise<{ total: number; tables: { table: string; rows: number; bytes: number }[] }> {
  await db.query("vacuum");
  const total = Number((await db.query<{ b: string }>("select pg_database_size(current_database()) as b")).rows[0]!.b);
  const tables = await db.query<{ table: string; rows: string; bytes: string }>(
    `select n.nspname || '.' || c.relname as table, c.reltuples::bigint::text as rows, pg_total_relation_size(c.oid)::text as bytes
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relkind = 'r' and n.nspname in ('manent', 'dbos') order by pg_total_relation_size(c.oid) desc`,
  );
  return { total, tables: tables.rows.map((t) => ({ table: t.table, rows: Math.max(0, Number(t.rows)), bytes: Number(t.bytes) })) };
}

async function withServer<T>(
  extra: Record<string, unknown>,
  fn: (server: ServerProcess, db: pg.Client) => Promise<T>,
  bin?: string,
): Promise<T> {
  const url = await pgServer.createDatabase({ empty: true });
  const config = await ws.write(`manent-${Date.now()}.yml`, manentYml(url, { concurrency: 100, ...extra }));
  const server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" }, ...(bin ? { bin } : {}) });
  const db = new pg.Client(url);
  await db.connect();
  try {
    return await fn(server, db);
  } finally {
    await db.end();
    await server.stop();
  }
}

// 1. Without a policy: what one deploy costs (with --ref, the reference's server first).
const reference = opts.ref === undefined ? undefined : await checkoutRef(opts.ref);
const growthOf = (bin?: string) =>
  withServer(
    {},
    async (server, db) => {
      await deployMany(server, apps, 0); // warm-up: every application has its first deploy, the tables their first pages
      const before = await sizes(db);
      await deployMany(server, perRound, 1);
      const afterSizes = await sizes(db);
      const per = (now: number, then: number) => Math.round((now - then) / perRound);
      return {
        bytes_per_deploy: per(afterSizes.total, before.total),
        tables: afterSizes.tables
          .map((t) => {
            const was = before.tables.find((b) => b.table === t.table);
            return {
              table: t.table,
              rows_per_deploy: (t.rows - (was?.rows ?? 0)) / perRound,
              bytes_per_deploy: per(t.bytes, was?.bytes ?? 0),
            };
          })
          .filter((t) => t.bytes_per_deploy !== 0 || t.rows_per_deploy !== 0),
      };
    },
    bin,
  );
let growthRef: Awaited<ReturnType<typeof growthOf>> | undefined;
try {
  growthRef = reference && (await growthOf(reference.bin));
} finally {
  await reference?.remove();
}
const growth = await growthOf();

// 2. With a policy: the size round after round.
const flat = await withServer({ retention: { sweep_interval: 0, deploys: { keep_last: keep } } }, async (server, db) => {
  const out: { round: number; deploys: number; deleted: number; kept: number; database_bytes: number }[] = [];
  for (let round = 1; round <= rounds; round++) {
    await deployMany(server, perRound, round);
    const swept = (await (await fetch(`${server.url}/api/v1/retention/sweep`, { method: "POST" })).json()) as { deploys: number };
    const kept = Number((await db.query<{ n: string }>("select count(*) as n from manent.deploys")).rows[0]!.n);
    out.push({ round, deploys: round * perRound, deleted: swept.deploys, kept, database_bytes: (await sizes(db)).total });
  }
  return out;
});
await pgServer.stop();

const share = machine.report();
if (opts.json) {
  process.stdout.write(
    `${JSON.stringify({ ...share, apps, deploys: perRound, keep, ref: opts.ref, growth_ref: growthRef, growth, flat })}\n`,
  );
} else {
  const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`;
  const print = (what: string, g: typeof growth) => {
    const rows = g.tables.reduce((n, t) => n + t.rows_per_deploy, 0);
    process.stdout.write(
      `${what}without a policy: ${kb(g.bytes_per_deploy)} and ${rows.toFixed(1)} rows per no-op deploy (${perRound} deploys, ${apps} applications)\n`,
    );
    for (const t of g.tables)
      process.stdout.write(
        `  ${t.table.padEnd(32)} ${t.rows_per_deploy.toFixed(1).padStart(6)} rows  ${kb(t.bytes_per_deploy).padStart(9)}\n`,
      );
  };
  if (growthRef) print(`${opts.ref}: `, growthRef);
  print(opts.ref ? "this checkout: " : "", growth);
  process.stdout.write(`with retention deploys.keep_last ${keep} (${apps} applications: ${apps * keep} deploys kept at most):\n`);
  for (const r of flat)
    process.stdout.write(
      `  round ${r.round}: ${r.deploys} deploys run, ${r.deleted} deleted by the sweep, ${r.kept} kept, database ${(r.database_bytes / 1048576).toFixed(1)} MB\n`,
    );
}
