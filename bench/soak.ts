/**
 * A soak of one manent-server for --minutes under a mixed load, as an operator runs it for months:
 * tenant team-a deploys (every fifth with a fresh uploaded artifact), rolls back (every seventh),
 * reads the deploy list and its identity several times a second and keeps SSE clients that reconnect;
 * tenant team-b cuts uploads short every 0.3 s (a dropped connection mid-body). A real Postgres (the
 * embedded one, started here so its size can be read) and the noop plugin.
 *
 * Every --sample seconds it prints, over the time: the server's RSS and open files, the database's
 * size, team-a's requests (count, failed, p99 and slowest answer in that interval), deploys,
 * rollbacks, uploads, cut uploads and SSE connections. team-a's failures must stay 0: a failure
 * names the request and its answer (a cut upload of another tenant must never answer for it).
 *
 * Memory after warm-up: the server runs with the inspector on loopback; at the first sample after
 * the first interval (warm-up) and at the end (after the load stopped and --idle seconds of quiet)
 * the bench forces a full GC and reads the RSS and V8's live heap, so the two points compare alike
 * (a sample under load catches the heap at any point of its sawtooth).
 *
 * Run: node --import tsx bench/soak.ts [--minutes 30] [--sample 60] [--sse 20] [--idle 10] [--json]
 *   --json  one JSON object of figures as the last stdout line
 */
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, rm, stat } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { parseArgs } from "node:util";
import pg from "pg";
import { ApiClient } from "../src/cli/api-client.js";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { Inspector, inspectorUrl, withWebSocket } from "./support/inspector.js";
import { watchMachine } from "./support/machine-share.js";

await withWebSocket();

const { values: opts } = parseArgs({
  options: {
    minutes: { type: "string", default: "30" },
    sample: { type: "string", default: "60" },
    sse: { type: "string", default: "20" },
    idle: { type: "string", default: "10" },
    json: { type: "boolean", default: false },
  },
});
const minutes = Number(opts.minutes);
const sampleSeconds = Number(opts.sample);
const sseClients = Number(opts.sse);
const idleSeconds = Number(opts.idle);
if (!(minutes > 0) || !(sampleSeconds > 0) || !Number.isInteger(sseClients) || sseClients < 0 || !(idleSeconds >= 0)) {
  console.error("usage: bench/soak.ts [--minutes M] [--sample S] [--sse N] [--idle S] [--json]");
  process.exit(2);
}

const teamA = `soak-team-a-${randomBytes(12).toString("hex")}`;
const teamB = `soak-team-b-${randomBytes(12).toString("hex")}`;
const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");
const mb = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;

const pgServer = await TestPostgres.start();
const databaseUrl = await pgServer.createDatabase({ empty: true });
const ws = await createWorkspace("manent-bench-soak-");
const config = await ws.write(
  "manent.yml",
  manentYml(databaseUrl, {
    auth: {
      tokens: [
        { name: "team-a", tenant: "team-a", sha256: sha(teamA) },
        { name: "team-b", tenant: "team-b", sha256: sha(teamB) },
      ],
    },
  }),
);
await ws.write("envconfig/team-a/shop/shop/soak.yml", {
  plugin: "noop",
  targets: [{ host: "shop-1" }, { host: "shop-2" }, { host: "shop-3" }],
  params: {},
  rollback: { enabled: true },
});

let server: ServerProcess | undefined;
let inspector: Inspector | undefined;
const stopAll = async (): Promise<void> => {
  inspector?.close();
  await server?.stop();
  await pgServer.stop();
  await rm(ws.dir, { recursive: true, force: true });
};
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void stopAll().finally(() => process.exit(130)));

server = await startServer(config, {
  cwd: ws.dir,
  env: { MANENT_LOG_LEVEL: "info", NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --inspect=127.0.0.1:0` },
});
inspector = await Inspector.connect(inspectorUrl(server.logs()));
const gcInspector = inspector;
const srv = server;
const pid = srv.child.pid!;
const a = new ApiClient(srv.url, teamA);
const deadline = Date.now() + minutes * 60_000;
const running = () => Date.now() < deadline;

/** team-a's answers in the current interval, and every failure with what it was. */
let latencies: number[] = [];
let requests = 0;
const failures: string[] = [];
const counts = { deploys: 0, rollbacks: 0, uploads: 0, cuts: 0, sse_connects: 0, sse_events: 0 };
/** Runs one request of team-a's; its time counts towards the answers' latency unless it waits by design (a deploy's long poll). */
async function timed<T>(what: string, call: () => Promise<T>, opts: { waits?: boolean } = {}): Promise<T | undefined> {
  const started = performance.now();
  try {
    return await call();
  } catch (err) {
    failures.push(`${new Date().toISOString()} ${what}: ${(err as Error).message}`);
    return undefined;
  } finally {
    if (!opts.waits) latencies.push(performance.now() - started);
    requests++;
  }
}

async function deployer(): Promise<void> {
  let n = 0;
  while (running()) {
    n++;
    const version = `1.0.${n}`;
    let source: string;
    if (n % 5 === 0) {
      const bytes = randomBytes(256 * 1024);
      const file = await ws.write(`dist/shop-${version}.bin`, bytes.toString("base64"));
      const { size } = await stat(file);
      const digest = sha(await readFile(file));
      await timed("upload", () => a.upload("team-a", digest, file, size));
      counts.uploads++;
      source = `upload:${digest}/shop-${version}.bin`;
    } else source = await ws.write(`dist/shop-${version}.txt`, `shop ${version}\n`);
    const d = { ...descriptor("shop", "soak", source, version), tenant: "team-a" };
    const submitted = await timed("submit", () => a.submit({ descriptor: d, descriptor_file: "soak.yml" }));
    if (!submitted) continue;
    const done = await timed("wait", () => a.deploy(submitted.id, 120), { waits: true });
    if (done) counts.deploys++;
    if (done && done.status !== "succeeded") failures.push(`deploy ${submitted.id} ended ${done.status}: ${done.error?.message ?? ""}`);
    if (n % 7 === 0) {
      const rb = await timed("rollback", () => a.rollback({ descriptor: d, descriptor_file: "soak.yml" }));
      if (rb && (await timed("wait rollback", () => a.deploy(rb.id, 120), { waits: true }))?.status === "succeeded") counts.rollbacks++;
    }
  }
}

async function reader(): Promise<void> {
  while (running()) {
    await timed("list", () => a.list({ limit: "20" }));
    await timed("whoami", () => a.whoami());
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** team-b: a PUT that announces 20 MB, sends 64 KiB and drops the connection. */
async function cutter(): Promise<void> {
  const url = new URL(`/api/v1/uploads/${sha(randomBytes(8))}?tenant=team-b`, srv.url);
  while (running()) {
    await new Promise<void>((resolve) => {
      const req = httpRequest(url, {
        method: "PUT",
        headers: { authorization: `Bearer ${teamB}`, "content-type": "application/octet-stream", "content-length": String(20 << 20) },
      });
      req.on("error", () => resolve());
      req.write(randomBytes(64 * 1024), () => {
        req.destroy();
        resolve();
      });
    });
    counts.cuts++;
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function sseClient(i: number): Promise<void> {
  while (running()) {
    const abort = new AbortController();
    const hold = setTimeout(() => abort.abort(), 2_000 + ((i * 733) % 8_000));
    await a
      .streamEvents("/api/v1/events", () => void counts.sse_events++, {
        signal: abort.signal,
        reconnects: 0,
        onOpen: () => void counts.sse_connects++,
      })
      .catch((err: unknown) => {
        if (!abort.signal.aborted) failures.push(`${new Date().toISOString()} events stream: ${(err as Error).message}`);
      });
    clearTimeout(hold);
  }
}

async function rssOf(p: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${p}/status`, "utf8"))![1]) * 1024;
}

interface Sample {
  minute: number;
  rss_mb: number;
  open_files: number;
  database_mb: number;
  requests: number;
  failed: number;
  p99_ms: number;
  slowest_ms: number;
  deploys: number;
  rollbacks: number;
  uploads: number;
  cut_uploads: number;
  sse_connects: number;
}
const samples: Sample[] = [];
const db = new pg.Client(databaseUrl);
await db.connect();
const started = Date.now();
let failedBefore = 0;
/** RSS and V8's live heap after a forced full GC. */
async function afterGc(): Promise<{ rss_mb: number; heap_live_mb: number }> {
  const heap = await gcInspector.heapUsedAfterGc();
  return { rss_mb: mb(await rssOf(pid)), heap_live_mb: mb(heap) };
}
let warmGc: { rss_mb: number; heap_live_mb: number } | undefined;
async function sample(): Promise<void> {
  // The sample after the first interval is the warm-up point: measured after a full GC (see the top).
  if (samples.length === 1) warmGc = await afterGc();
  const window = latencies.sort((x, y) => x - y);
  latencies = [];
  const size = Number((await db.query<{ size: string }>("select pg_database_size(current_database()) as size")).rows[0]!.size);
  const s: Sample = {
    minute: Math.round((Date.now() - started) / 6_000) / 10,
    rss_mb: mb(await rssOf(pid)),
    open_files: (await readdir(`/proc/${pid}/fd`)).length,
    database_mb: mb(size),
    requests,
    failed: failures.length - failedBefore,
    p99_ms: Math.round(window[Math.floor(window.length * 0.99)] ?? 0),
    slowest_ms: Math.round(window.at(-1) ?? 0),
    deploys: counts.deploys,
    rollbacks: counts.rollbacks,
    uploads: counts.uploads,
    cut_uploads: counts.cuts,
    sse_connects: counts.sse_connects,
  };
  failedBefore = failures.length;
  samples.push(s);
  console.log(
    Object.entries(s)
      .map(([k, v]) => `${k}=${v}`)
      .join(" "),
  );
}

console.log(`soak: ${minutes} min, a sample every ${sampleSeconds} s, ${sseClients} SSE clients; server pid ${pid}`);
await sample();
let endGc: { rss_mb: number; heap_live_mb: number } | undefined;
const sampler = setInterval(() => void sample().catch((err: unknown) => failures.push(`sample: ${String(err)}`)), sampleSeconds * 1000);
const machine = watchMachine();
try {
  await Promise.all([deployer(), reader(), cutter(), ...Array.from({ length: sseClients }, (_, i) => sseClient(i))]);
  clearInterval(sampler);
  await sample();
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  endGc = await afterGc();
  console.log(`after ${idleSeconds} s idle and a full GC: rss_mb=${endGc.rss_mb} heap_live_mb=${endGc.heap_live_mb}`);
} finally {
  clearInterval(sampler);
  await db.end();
  await stopAll();
}

const first = samples[0]!;
const last = samples.at(-1)!;
// After warm-up: the first sample past the first interval (V8's young generation and the JIT grown).
const warm = warmGc ?? { rss_mb: samples[Math.min(1, samples.length - 1)]!.rss_mb, heap_live_mb: NaN };
const end = endGc ?? { rss_mb: last.rss_mb, heap_live_mb: NaN };
const pct = (from: number, to: number) => Math.round(((to - from) / from) * 1000) / 10;
const summary = {
  minutes,
  rss_mb_first: first.rss_mb,
  /** After warm-up and at the end: both after a full GC, the end after --idle seconds of quiet. */
  rss_mb_after_warmup: warm.rss_mb,
  rss_mb_end: end.rss_mb,
  rss_growth_after_warmup_pct: pct(warm.rss_mb, end.rss_mb),
  heap_live_mb_after_warmup: warm.heap_live_mb,
  heap_live_mb_end: end.heap_live_mb,
  heap_live_growth_after_warmup_pct: pct(warm.heap_live_mb, end.heap_live_mb),
  rss_mb_max: Math.max(...samples.map((s) => s.rss_mb)),
  /** The last sample under load (no GC forced). */
  rss_mb_last: last.rss_mb,
  open_files_max: Math.max(...samples.map((s) => s.open_files)),
  open_files_last: last.open_files,
  database_mb_last: last.database_mb,
  slowest_ms: Math.max(...samples.map((s) => s.slowest_ms)),
  p99_ms_max: Math.max(...samples.map((s) => s.p99_ms)),
  team_a_requests: last.requests,
  team_a_failed: failures.length,
  deploys: last.deploys,
  rollbacks: last.rollbacks,
  uploads: last.uploads,
  cut_uploads: last.cut_uploads,
  sse_connects: last.sse_connects,
};
for (const f of failures.slice(0, 20)) console.log(`failed: ${f}`);
console.log(
  `summary: RSS ${summary.rss_mb_first} -> ${summary.rss_mb_after_warmup} after warm-up (GC) -> max ${summary.rss_mb_max} under load -> ` +
    `${summary.rss_mb_end} MB at the end (idle, GC): ${summary.rss_growth_after_warmup_pct >= 0 ? "+" : ""}${summary.rss_growth_after_warmup_pct}% after warm-up; ` +
    `live heap ${summary.heap_live_mb_after_warmup} -> ${summary.heap_live_mb_end} MB (${summary.heap_live_growth_after_warmup_pct}%); open files max ${summary.open_files_max}; ` +
    `database ${summary.database_mb_last} MB; slowest answer ${summary.slowest_ms} ms (p99 at most ${summary.p99_ms_max} ms); ` +
    `team-a ${summary.team_a_requests} requests, ${summary.team_a_failed} failed; ${summary.deploys} deploys, ${summary.rollbacks} rollbacks, ` +
    `${summary.uploads} uploads, ${summary.cut_uploads} cut uploads, ${summary.sse_connects} SSE connections`,
);
const share = machine.report();
if (opts.json) console.log(JSON.stringify({ ...summary, ...share }));
process.exitCode = failures.length === 0 ? 0 : 1;
