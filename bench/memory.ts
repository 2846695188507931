/**
 * Memory of one manent-server over many sequential no-op deploys (2 targets each, the noop plugin, the
 * embedded Postgres, the default log level): the process's RSS as `ps` shows it, sampled along the
 * way, and at the start (idle after one warm-up deploy) and at the end (after an idle pause) also the
 * RSS and V8's live heap after a forced full GC. The server runs with the inspector on loopback (port
 * 0); the bench drives it over the DevTools protocol: HeapProfiler.collectGarbage, Runtime.getHeapUsage
 * and, on request, heap snapshots compared by constructor (what grew between two points, count and bytes).
 *
 * Run: node --import tsx bench/memory.ts [--deploys 10000] [--every N] [--idle 10] [--gc-each]
 *        [--snapshots 200,2000] [--snapshot-dir DIR] [--json]
 *   --gc-each    also force a GC at every sample (the live heap's curve; it changes the RSS curve)
 *   --snapshots  heap snapshots after these deploys, compared at the end (they grow the RSS for good)
 *   --json       one JSON object of figures as the last stdout line (bench/table.ts reads it)
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startServer, type ServerProcess } from "../test/support/server-process.js";
import { Inspector, withWebSocket } from "./support/inspector.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";

await withWebSocket();

const { values: opts } = parseArgs({
  options: {
    deploys: { type: "string", default: "10000" },
    every: { type: "string" },
    idle: { type: "string", default: "10" },
    snapshots: { type: "string", default: "" },
    "snapshot-dir": { type: "string" },
    "gc-each": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  },
});
const deploys = Number(opts.deploys);
const every = Number(opts.every ?? Math.max(50, Math.round(deploys / 20)));
const idleSeconds = Number(opts.idle);
const snapshotAt = opts.snapshots ? opts.snapshots.split(",").map(Number) : [];
if (![deploys, every, idleSeconds, ...snapshotAt].every((n) => Number.isInteger(n) && n >= 0) || deploys < 1 || every < 1) {
  console.error("usage: bench/memory.ts [--deploys N] [--every N] [--idle S] [--snapshots N,N] [--snapshot-dir DIR] [--json]");
  process.exit(2);
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

interface Totals {
  count: number;
  size: number;
}

/** Live objects of a heap snapshot by kind and constructor (strings together, code together). */
async function summarize(file: string): Promise<Map<string, Totals>> {
  const snap = JSON.parse(await readFile(file, "utf8")) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f)) as [number, number, number];
  const byKey = new Map<string, Totals>();
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const name = snap.strings[snap.nodes[i + nameAt]!]!;
    const key = type === "object" || type === "closure" || type === "native" ? `${type} ${name}` : `(${type})`;
    const t = byKey.get(key) ?? { count: 0, size: 0 };
    t.count++;
    t.size += snap.nodes[i + sizeAt]!;
    byKey.set(key, t);
  }
  return byKey;
}

const mb = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;
const log = (line: string): void => console.log(line);

const ws = await createWorkspace("manent-bench-memory-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(undefined));
await ws.write("envconfig/untenanted/mem/mem/bench.yml", { plugin: "noop", targets: [{ host: "a" }, { host: "b" }], params: {} });
const snapshotDir = opts["snapshot-dir"] ?? (snapshotAt.length ? await mkdtemp(path.join(os.tmpdir(), "manent-heap-")) : "");

let server: ServerProcess | undefined;
let inspector: Inspector | undefined;
// Stopped early (Ctrl-C, bench/table.ts stopped): the server and its Postgres stop too, the workspace goes.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    inspector?.close();
    void (server?.stop() ?? Promise.resolve()).then(() => rm(ws.dir, { recursive: true, force: true })).finally(() => process.exit(130));
  });
}
try {
  server = await startServer(config, {
    cwd: ws.dir,
    env: { MANENT_LOG_LEVEL: "info", NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --inspect=127.0.0.1:0` },
  });
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(server.logs())?.[1];
  if (!url) throw new Error(`the server printed no inspector address:\n${server.logs().slice(-2000)}`);
  inspector = await Inspector.connect(url);
  const pid = server.child.pid!;
  const srv = server;

  let version = 0;
  const deploy = async (): Promise<void> => {
    const { id } = await srv.api.submit({ descriptor: descriptor("mem", "bench", artifact, `1.0.${version++}`), descriptor_file: "bench" });
    const d = await srv.api.deploy(id, 120);
    if (d.status !== "succeeded") throw new Error(`deploy ${id} ${d.status}: ${d.error?.message}`);
  };
  interface Sample {
    deploys: number;
    /** As `ps` shows it: whatever V8 and the allocator hold at that moment. */
    rss_mb: number;
    heap_used_mb: number;
    /** What the RSS is made of, as the server's `process.memoryUsage()` and V8's heap spaces say. */
    heap_committed_mb: number;
    code_space_mb: number;
    external_mb: number;
    /** After a forced full GC (at the start, at the end, and at every sample with --gc-each). */
    rss_after_gc_mb?: number;
    heap_used_after_gc_mb?: number;
  }
  const samples: Sample[] = [];
  const sample = async (n: number, gc: boolean, label = ""): Promise<Sample> => {
    const rss = await rssOf(pid);
    const m = await inspector!.memoryUsage();
    const s: Sample = {
      deploys: n,
      rss_mb: mb(rss),
      heap_used_mb: mb(m.heapUsed),
      heap_committed_mb: mb(m.heapTotal),
      code_space_mb: mb(m.codeSpace),
      external_mb: mb(m.external),
    };
    if (gc) {
      s.heap_used_after_gc_mb = mb(await inspector!.heapUsedAfterGc());
      s.rss_after_gc_mb = mb(await rssOf(pid));
    }
    samples.push(s);
    const cols = (rss: number, heap: number): string => `RSS ${rss.toFixed(1).padStart(6)} MB  heap used ${heap.toFixed(1).padStart(6)} MB`;
    const afterGc = s.rss_after_gc_mb === undefined ? "" : `  | after GC: ${cols(s.rss_after_gc_mb, s.heap_used_after_gc_mb!)}`;
    const parts = `  (V8 heap ${s.heap_committed_mb} MB committed, code ${s.code_space_mb} MB; external ${s.external_mb} MB)`;
    log(`${String(n).padStart(7)} deploys  ${cols(s.rss_mb, s.heap_used_mb)}${afterGc}${label || parts}`);
    return s;
  };

  log(`manent-server pid ${pid}: ${deploys} sequential no-op deploys (2 targets each), sampled every ${every}`);
  await deploy(); // warms the plugin, the pools, the artifact cache: "idle" is a server that has deployed once
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await sample(0, true, "  (idle, after one warm-up deploy)");
  const t0 = performance.now();
  const snapshots: string[] = [];
  for (let n = 1; n <= deploys; n++) {
    await deploy();
    if (n % every === 0 && n < deploys) await sample(n, opts["gc-each"]);
    if (snapshotAt.includes(n)) {
      const file = path.join(snapshotDir, `heap-${n}.heapsnapshot`);
      await inspector.snapshot(file);
      snapshots.push(file);
      log(`        heap snapshot at ${n} deploys: ${file} (taking it grows the RSS: later RSS figures are not comparable)`);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  await sample(deploys, opts["gc-each"]);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const end = await sample(deploys, true, `  (after ${idleSeconds} s idle)`);

  // Per-deploy growth of the live heap: with --gc-each, the least-squares slope over the second half
  // of the run (the first deploys fill caches bounded by design and warm the JIT; what still grows
  // after that is retained per deploy); otherwise the end's live heap against the start's.
  const half = samples.filter((s) => s.heap_used_after_gc_mb !== undefined && s.deploys >= deploys / 2 && s !== end);
  const slope = (() => {
    if (half.length < 3) return ((end.heap_used_after_gc_mb! - idle.heap_used_after_gc_mb!) * 1048576) / deploys;
    const mx = half.reduce((a, s) => a + s.deploys, 0) / half.length;
    const my = half.reduce((a, s) => a + s.heap_used_after_gc_mb!, 0) / half.length;
    const num = half.reduce((a, s) => a + (s.deploys - mx) * (s.heap_used_after_gc_mb! - my), 0);
    const den = half.reduce((a, s) => a + (s.deploys - mx) ** 2, 0);
    return (num / den) * 1048576;
  })();
  const pct = (a: number, b: number): number => Math.round(((b - a) / a) * 1000) / 10;
  // The RSS at mid-run: growth from there to the last deploy says whether it has levelled off (V8 sizes its
  // young generation and old-generation headroom up to their bounds during the first deploys).
  const mid = samples.find((s) => s.deploys >= deploys / 2 && s !== idle) ?? end;
  const busyEnd = samples.at(-2)!; // after the last deploy, before the idle pause
  const figures = {
    bench: "memory",
    deploys,
    seconds: Math.round(seconds),
    deploys_per_second: Math.round((deploys / seconds) * 10) / 10,
    rss_idle_mb: idle.rss_mb,
    rss_end_mb: end.rss_mb,
    rss_max_mb: Math.max(...samples.map((s) => s.rss_mb)),
    rss_growth_pct: pct(idle.rss_mb, end.rss_mb),
    rss_mid_deploys: mid.deploys,
    rss_mid_mb: mid.rss_mb,
    rss_growth_second_half_pct: pct(mid.rss_mb, busyEnd.rss_mb),
    rss_after_gc_idle_mb: idle.rss_after_gc_mb!,
    rss_after_gc_end_mb: end.rss_after_gc_mb!,
    heap_used_idle_mb: idle.heap_used_after_gc_mb!,
    heap_used_end_mb: end.heap_used_after_gc_mb!,
    heap_growth_pct: pct(idle.heap_used_after_gc_mb!, end.heap_used_after_gc_mb!),
    heap_bytes_per_deploy: Math.round(slope),
    snapshots: snapshotAt,
    samples,
  };
  const signed = (x: number): string => `${x >= 0 ? "+" : ""}${x}%`;
  log(
    `RSS ${figures.rss_idle_mb} MB idle -> ${figures.rss_end_mb} MB after ${deploys} deploys and ${idleSeconds} s idle (${signed(figures.rss_growth_pct)}, max ${figures.rss_max_mb} MB; ${signed(figures.rss_growth_second_half_pct)} from ${mid.deploys} deploys to the last); ` +
      `after a forced GC: RSS ${figures.rss_after_gc_idle_mb} -> ${figures.rss_after_gc_end_mb} MB, live heap ${figures.heap_used_idle_mb} -> ${figures.heap_used_end_mb} MB (${signed(figures.heap_growth_pct)}, ` +
      `${figures.heap_bytes_per_deploy} bytes per deploy${half.length >= 3 ? " over the second half" : ""}); ${figures.deploys_per_second} deploys/s`,
  );

  if (snapshots.length >= 2) {
    inspector.close();
    inspector = undefined;
    const [a, b] = [snapshots[0]!, snapshots.at(-1)!];
    const [sa, sb] = [await summarize(a), await summarize(b)];
    const span = snapshotAt.at(-1)! - snapshotAt[0]!;
    const grown = [...sb]
      .map(([key, t]) => ({ key, count: t.count - (sa.get(key)?.count ?? 0), size: t.size - (sa.get(key)?.size ?? 0) }))
      .filter((g) => g.size > 0)
      .sort((x, y) => y.size - x.size)
      .slice(0, 25);
    log(`what grew between ${snapshotAt[0]} and ${snapshotAt.at(-1)} deploys (live objects by constructor; per deploy = over ${span}):`);
    for (const g of grown)
      log(
        `  ${(g.size / 1024).toFixed(0).padStart(8)} kB  ${String(g.count).padStart(8)} objects  ${(g.count / span).toFixed(2).padStart(7)}/deploy  ${g.key}`,
      );
  }
  if (opts.json) console.log(JSON.stringify(figures));
} finally {
  inspector?.close();
  await server?.stop();
  await rm(ws.dir, { recursive: true, force: true });
  if (snapshotDir && !opts["snapshot-dir"]) log(`heap snapshots kept in ${snapshotDir} (remove when done)`);
}
