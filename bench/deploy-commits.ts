/**
 * Issue 31, items 1 and 2: what one deploy costs Postgres. A real `manent-server` (its pg
 * connections tallied by bench/support/statement-tally.cjs, loaded with --require: a statement
 * outside a transaction is one commit, BEGIN … COMMIT one) on a database of its own, warmed up by
 * three deploys of each application, then, each measured by N sequential deploys:
 *
 * - commits per no-op deploy of one target, with each statement's (a transaction's as
 *   TX[its statements]) per deploy;
 * - commits per extra target (a deploy of 11 targets against one of 1, over 10);
 * - commits per canary step (a canary of 4 set_weight steps against one of 2, over 2);
 * - commits per no-op deploy at saturation: --burst deploys of as many applications submitted at
 *   once, and waited for by reading the list of deploys every 250 ms (not each deploy), with each
 *   statement per deploy;
 * - bytes per no-op deploy: rows and row bytes (pg_column_size) each table of the manent and dbos
 *   schemas gained, events included, and their total relation size (indexes and TOAST included,
 *   grown by whole pages) over the deploys;
 * - commits of the idle server over --idle seconds (the tally, and pg_stat_database's xact_commit),
 *   and of those the ones that wrote: transaction ids assigned and WAL bytes (the bench's own Postgres).
 *
 * The server runs unbundled (bench/support/unbundled-server.mjs), so the tally sees its pg.
 *
 * Sequential, so the server's timers (queue polls, heartbeats, health checks) are counted too.
 * With --ref COMMIT, that commit's server runs the same, in the same process and on the same
 * Postgres, before this checkout's: the figures before and after from one run.
 *
 * Run: node --import tsx bench/deploy-commits.ts [N=20] [--ref COMMIT] [--idle SECONDS=30] [--burst N=60] [--json]
 */
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { TestPostgres } from "../test/support/postgres.js";
import { serverBin, startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { databaseCounters } from "./support/database-counters.js";
import { readTally, resetTally, tallied, type Tally } from "./support/statement-tally.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts, positionals } = parseArgs({
  options: {
    ref: { type: "string" },
    idle: { type: "string", default: "30" },
    burst: { type: "string", default: "60" },
    json: { type: "boolean", default: false },
  },
  allowPositionals: true,
});
const n = Number(positionals[0] ?? 20);
const idleSeconds = Number(opts.idle);
const burst = Number(opts.burst);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

interface Figures {
  deploysPerSecond: number;
  commitsPerDeploy: number;
  commitsPerDeployAtSaturation: number;
  burstSeconds: number;
  burstStatements: [number, string][];
  commitsPerExtraTarget: number;
  commitsPerCanaryStep: number;
  idleCommits: number;
  idleXactCommit: number;
  idleWriteTransactions: number;
  idleWalBytes: number;
  bytes: { table: string; rows: number; rowBytes: number; relationBytes: number }[];
  statements: [number, string][];
  idleStatements: [number, string][];
}

const ref = opts.ref ? await checkoutRef(opts.ref) : undefined;
const pgs = await TestPostgres.start();
const results: Record<string, Figures> = {};
const machine = watchMachine();
try {
  const bins: Record<string, string> = { ...(ref && { [opts.ref!]: ref.bin }), this: serverBin };
  for (const [label, bin] of Object.entries(bins)) results[label] = await measure(bin);
} finally {
  await pgs.stop();
  await ref?.remove();
}

const labels = Object.keys(results);
const row = (what: string, f: (x: Figures) => string) =>
  console.log(`${what.padEnd(44)}${labels.map((l) => f(results[l]!).padStart(14)).join("")}`);
console.log(`${n} sequential deploys each; ${"".padEnd(20)}${labels.map((l) => l.padStart(14)).join("")}`);
row("no-op deploys/s (sequential)", (x) => x.deploysPerSecond.toFixed(1));
row("commits per no-op deploy (1 target)", (x) => x.commitsPerDeploy.toFixed(1));
row(`  at saturation (${burst} at once)`, (x) => x.commitsPerDeployAtSaturation.toFixed(1));
row(`  seconds for the ${burst}`, (x) => x.burstSeconds.toFixed(1));
row("commits per extra target", (x) => x.commitsPerExtraTarget.toFixed(2));
row("commits per canary step (set_weight)", (x) => x.commitsPerCanaryStep.toFixed(1));
row(`idle server: commits in ${idleSeconds} s (tally)`, (x) => String(x.idleCommits));
row(`idle: xact_commit in ${idleSeconds} s (pg_stat_database)`, (x) => String(x.idleXactCommit));
row(`idle: transactions that wrote, in ${idleSeconds} s (xids)`, (x) => String(x.idleWriteTransactions));
row(`idle: WAL bytes in ${idleSeconds} s`, (x) => String(x.idleWalBytes));
const total = (x: Figures, k: "rows" | "rowBytes" | "relationBytes") => x.bytes.reduce((s, b) => s + b[k], 0);
row("rows kept per no-op deploy", (x) => total(x, "rows").toFixed(1));
row("row bytes per no-op deploy", (x) => total(x, "rowBytes").toFixed(0));
row("relation bytes per no-op deploy (+indexes)", (x) => total(x, "relationBytes").toFixed(0));
for (const label of labels) {
  console.log(`\n${label}: per no-op deploy, by table (rows, row bytes, relation bytes)`);
  for (const b of results[label]!.bytes.filter((b) => b.rows !== 0 || b.relationBytes !== 0))
    console.log(
      `${b.table.padEnd(36)}${b.rows.toFixed(1).padStart(8)}${b.rowBytes.toFixed(0).padStart(8)}${b.relationBytes.toFixed(0).padStart(9)}`,
    );
  console.log(`\n${label}: statements per no-op deploy`);
  for (const [count, text] of results[label]!.statements.slice(0, 40)) console.log(`${(count / n).toFixed(2).padStart(6)} ${text}`);
  console.log(`\n${label}: statements per no-op deploy at saturation`);
  for (const [count, text] of results[label]!.burstStatements.slice(0, 30))
    console.log(`${(count / burst).toFixed(2).padStart(6)} ${text}`);
  console.log(`\n${label}: statements of the idle server in ${idleSeconds} s`);
  for (const [count, text] of results[label]!.idleStatements.slice(0, 15)) console.log(`${String(count).padStart(6)} ${text}`);
}
const share = machine.report();
if (opts.json) console.log(JSON.stringify({ ...share, n, idleSeconds, results }));

async function measure(bin: string): Promise<Figures> {
  const ws = await createWorkspace("manent-count-");
  const artifact = await ws.write("dist/app.txt", "bench\n");
  const apps = {
    one: { targets: 1 },
    eleven: { targets: 11 },
    canary2: { targets: 1, steps: [50, 100] },
    canary4: { targets: 1, steps: [25, 50, 75, 100] },
    ...Object.fromEntries(Array.from({ length: burst }, (_, i) => [`burst${i}`, { targets: 1 }])),
  };
  for (const [app, a] of Object.entries(apps))
    await ws.write(`envconfig/untenanted/${app}/${app}/bench.yml`, {
      plugin: "noop",
      targets: Array.from({ length: a.targets }, (_, i) => ({ host: `${app}-${i}` })),
      ...("steps" in a && {
        params: { state_dir: ws.path("state") },
        rollout: { canary: { steps: a.steps.map((w) => ({ set_weight: w })) } },
      }),
    });
  const url = await pgs.createDatabase({ empty: true });
  const config = await ws.write("manent.yml", manentYml(url, {}));
  const counted = tallied(bin);
  const server = await startServer(config, { cwd: ws.dir, bin: counted.bin, env: { MANENT_LOG_LEVEL: "warn", ...counted.env } });
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const pid = server.child.pid!;
  const tally = async (fn: () => Promise<void>): Promise<Tally> => {
    resetTally(pid);
    await fn();
    return readTally(pid);
  };
  let v = 0;
  const deploy = async (app: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "bench", artifact, `1.0.${++v}`), descriptor_file: "bench" });
    let d = await server.api.deploy(id, 60);
    while (d.status === "queued" || d.status === "running") d = await server.api.deploy(id, 60);
    if (d.status !== "succeeded") throw new Error(`${app}: ${d.status} ${JSON.stringify(d.error)}`);
  };
  /** `burst` deploys, one of each burst application, submitted at once; waited for by the list. */
  const deployBurst = async (): Promise<void> => {
    const ids = await Promise.all(
      Array.from({ length: burst }, async (_, i) => {
        const app = `burst${i}`;
        return (await server.api.submit({ descriptor: descriptor(app, "bench", artifact, `1.0.${++v}`), descriptor_file: "bench" })).id;
      }),
    );
    const pending = new Set(ids);
    while (pending.size > 0) {
      await delay(250);
      for (const d of (await server.api.list({ limit: String(Math.min(1000, burst * 2)) })).deploys) {
        if (!pending.has(d.id) || d.status === "queued" || d.status === "running") continue;
        if (d.status !== "succeeded") throw new Error(`${d.application}: ${d.status}`);
        pending.delete(d.id);
      }
    }
  };
  const deploys = (app: string) =>
    tally(async () => {
      for (let i = 0; i < n; i++) await deploy(app);
    });
  try {
    for (const app of Object.keys(apps).filter((a) => !a.startsWith("burst"))) for (let i = 0; i < 3; i++) await deploy(app);
    await deployBurst();
    const before = await sizes(db);
    const t0 = performance.now();
    const one = await deploys("one");
    const seconds = (performance.now() - t0) / 1000;
    const after = await sizes(db);
    const eleven = await deploys("eleven");
    const canary2 = await deploys("canary2");
    const canary4 = await deploys("canary4");
    const b0 = performance.now();
    const burstTally = await tally(deployBurst);
    const burstSeconds = (performance.now() - b0) / 1000;
    const xact = async () => (await databaseCounters(db)).commits;
    await delay(2000); // what the last deploy set off (notifications, event reads) settles first
    // Writes, cluster-wide (this Postgres is the bench's own): transaction ids assigned (a read-only
    // transaction takes none and flushes no WAL), read without taking one, and WAL bytes.
    const writes = async () =>
      (
        await db.query<{ xid: string; lsn: string }>(
          `select pg_snapshot_xmax(pg_current_snapshot())::text as xid, pg_current_wal_insert_lsn()::text as lsn`,
        )
      ).rows[0]!;
    let x0 = 0;
    let w0 = { xid: "0", lsn: "0/0" };
    const idle = await tally(async () => {
      x0 = await xact();
      w0 = await writes();
      await delay(idleSeconds * 1000);
    });
    const w1 = await writes();
    const idleWal = (await db.query<{ b: string }>(`select pg_wal_lsn_diff($1, $2)::text as b`, [w1.lsn, w0.lsn])).rows[0]!.b;
    // pg_stat_database is updated by each backend at most once a second, and when it goes idle.
    await delay(1500);
    const idleXact = (await xact()) - x0 - 1;
    return {
      deploysPerSecond: n / seconds,
      commitsPerDeploy: one.commits / n,
      commitsPerDeployAtSaturation: burstTally.commits / burst,
      burstSeconds,
      burstStatements: burstTally.statements,
      commitsPerExtraTarget: (eleven.commits - one.commits) / n / 10,
      commitsPerCanaryStep: (canary4.commits - canary2.commits) / n / 2,
      idleCommits: idle.commits,
      idleXactCommit: idleXact,
      idleWriteTransactions: Number(w1.xid) - Number(w0.xid),
      idleWalBytes: Number(idleWal),
      bytes: [...after].map(([table, a]) => {
        const b = before.get(table) ?? { rows: 0, rowBytes: 0, relationBytes: 0 };
        return {
          table,
          rows: (a.rows - b.rows) / n,
          rowBytes: (a.rowBytes - b.rowBytes) / n,
          relationBytes: (a.relationBytes - b.relationBytes) / n,
        };
      }),
      statements: one.statements,
      idleStatements: idle.statements,
    };
  } finally {
    await db.end();
    await server.stop();
  }
}

/** Every table of the manent and dbos schemas: its rows, their bytes, and its size with indexes and TOAST. */
async function sizes(db: pg.Client): Promise<Map<string, { rows: number; rowBytes: number; relationBytes: number }>> {
  const tables = await db.query<{ t: string; size: string }>(
    `select format('%I.%I', n.nspname, c.relname) as t, pg_total_relation_size(c.oid)::text as size
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relkind = 'r' and n.nspname in ('manent', 'dbos') order by 1`,
  );
  const out = new Map<string, { rows: number; rowBytes: number; relationBytes: number }>();
  for (const { t, size } of tables.rows) {
    const r = await db.query<{ rows: string; bytes: string }>(
      `select count(*)::text as rows, coalesce(sum(pg_column_size(x.*)), 0)::text as bytes from ${t} x`,
    );
    out.set(t, { rows: Number(r.rows[0]!.rows), rowBytes: Number(r.rows[0]!.bytes), relationBytes: Number(size) });
  }
  return out;
}
