/**
 * Issue 24, item 5: one submission of a deploy whose envconfig has 20,000 targets, on a real
 * manent-server (the embedded Postgres, the noop plugin, `parallel: 1000`), several times in a row.
 * Before each submission the envconfig's text changes (a comment line), so every one is the first
 * submission after a change and parses the file (the server keeps envconfigs it parsed, by text);
 * one more submission of the unchanged file (a cached repeat) follows, reported apart.
 * Per submission it prints:
 *  - the POST's answer time (resolve: the YAML read and validated, the plugin chosen, the deploy
 *    recorded and queued) and submit → finished (the whole deploy: every target's result recorded);
 *  - the server's memory: the peak RSS over the RSS just before the submission, until the POST is
 *    answered (what reading the envconfig costs) and until the deploy finished (the kernel's
 *    high-water mark `VmHWM`, reset before each submission through /proc/PID/clear_refs, so no
 *    sample can miss the peak), and the RSS after it;
 *  - in this process, the envconfig read alone (YAML parse + zod validation, what every resolve pays):
 *    its time and the heap it allocates (with --expose-gc, GC'd before and measured right after).
 *
 * Run: node --import tsx bench/large-envconfig.ts [--targets 20000] [--runs 3] [--cpu-prof DIR] [--json]
 *   --runs      submissions after a change (the medians), then one cached repeat
 *   --cpu-prof  a V8 CPU profile of manent-server into DIR (bench/support/cpu-profile.mjs)
 *   --json      one JSON object of figures as the last stdout line (bench/table.ts reads it)
 */
import { spawn } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

// The in-process figure needs a GC on demand: run again with --expose-gc.
if (typeof globalThis.gc !== "function") {
  const child = spawn(process.execPath, ["--expose-gc", ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => child.kill(signal));
  const [code, signal] = (await new Promise((res) => child.on("exit", (...a) => res(a)))) as [number | null, string | null];
  process.exit(code ?? (signal ? 1 : 0));
}
const gc = globalThis.gc as () => void;

const { values: opts } = parseArgs({
  options: {
    targets: { type: "string", default: "20000" },
    runs: { type: "string", default: "3" },
    "cpu-prof": { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const targets = Number(opts.targets);
const runs = Number(opts.runs);
const mb = (b: number): number => Math.round((b / 1048576) * 10) / 10;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const load = (): string => loadavg()[0]!.toFixed(1);

const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(undefined));
const envconfig = {
  plugin: "noop",
  // A host and a label per target, as in bench/rollouts.ts: 20,000 fit in manent's 1 MB limit of a YAML file.
  targets: Array.from({ length: targets }, (_, i) => ({ host: `t${i}`, labels: { zone: `z${i % 10}` } })),
  params: {},
  parallel: 1000,
};
const envconfigFile = await ws.write("envconfig/untenanted/large/large/bench.yml", envconfig);
await ws.write("envconfig/untenanted/small/small/bench.yml", { plugin: "noop", targets: [{ host: "s0" }], params: {} });

// In this process: the envconfig's read alone, as the server's resolve does it.
const { loadYamlFile } = await import("../src/core/config/yaml-file.js");
const { envconfigSchema } = await import("../src/core/config/envconfig.js");
const readMs: number[] = [];
const readHeap: number[] = [];
for (let i = 0; i < runs + 1; i++) {
  gc();
  const before = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  const parsed = await loadYamlFile(envconfigFile, envconfigSchema, "bench.yml");
  const t1 = performance.now();
  const after = process.memoryUsage().heapUsed;
  if (parsed.targets.length !== targets) throw new Error("the envconfig read lost targets");
  if (i > 0) {
    readMs.push(t1 - t0);
    readHeap.push(after - before);
  }
}
console.log(
  `envconfig of ${targets.toLocaleString("en")} targets (${mb((await readFile(envconfigFile)).length)} MB of YAML), in this process:`,
);
console.log(`  read + validate   median ${Math.round(median(readMs))} ms, heap allocated ${mb(median(readHeap))} MB (load ${load()})`);

const env: Record<string, string> = { MANENT_LOG_LEVEL: "warn" };
if (opts["cpu-prof"]) {
  await mkdir(resolve(opts["cpu-prof"]), { recursive: true });
  env.MANENT_BENCH_CPU_PROF_DIR = resolve(opts["cpu-prof"]);
  env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import ${pathToFileURL(join(import.meta.dirname, "support", "cpu-profile.mjs")).href}`;
}
const server = await startServer(config, { cwd: ws.dir, env });
const pid = server.child.pid!;
const status = async (): Promise<{ rss: number; hwm: number }> => {
  const s = await readFile(`/proc/${pid}/status`, "utf8");
  return { rss: Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]) * 1024, hwm: Number(/VmHWM:\s+(\d+) kB/.exec(s)![1]) * 1024 };
};
const ms = (a: string | null, b: string | null): number => Date.parse(b!) - Date.parse(a!);

interface Run {
  submit_ms: number;
  finished_ms: number;
  rss_before_mb: number;
  rss_peak_delta_mb: number;
  answer_rss_peak_delta_mb: number;
  rss_after_mb: number;
  load: string;
}
const results: Run[] = [];
let repeated: Run | undefined;
const machine = watchMachine();
try {
  // Warm the plugin, the pools and the artifact cache on a one-target deploy.
  const warm = await server.api.submit({ descriptor: descriptor("small", "bench", artifact, "0.0.0"), descriptor_file: "bench" });
  await server.api.deploy(warm.id, 60);
  const text = await readFile(envconfigFile, "utf8");
  for (let i = 1; i <= runs + 1; i++) {
    const repeat = i > runs;
    // A changed byte: the server parses the file again (a repeat reads the same text: its cached envconfig).
    if (!repeat) await writeFile(envconfigFile, `${text}# submission ${i}\n`);
    await new Promise((r) => setTimeout(r, 1000));
    const before = await status();
    await writeFile(`/proc/${pid}/clear_refs`, "5"); // resets VmHWM to the current RSS
    const t0 = performance.now();
    const { id } = await server.api.submit({ descriptor: descriptor("large", "bench", artifact, `1.0.${i}`), descriptor_file: "bench" });
    const submitted = performance.now() - t0;
    const answered = await status();
    const d = await server.api.deploy(id, 300);
    if (d.status !== "succeeded") throw new Error(`${id} ${d.status}: ${d.error?.message}`);
    const after = await status();
    const r: Run = {
      submit_ms: Math.round(submitted),
      finished_ms: ms(d.created_at, d.finished_at),
      rss_before_mb: mb(before.rss),
      rss_peak_delta_mb: mb(after.hwm - before.rss),
      answer_rss_peak_delta_mb: mb(answered.hwm - before.rss),
      rss_after_mb: mb(after.rss),
      load: load(),
    };
    if (repeat) repeated = r;
    else results.push(r);
    const steps = d.steps.map((st) => `${st.name} ${st.duration_ms ?? "?"}`).join(", ");
    console.log(`  steps (ms): ${steps}; created -> started ${ms(d.created_at, d.started_at)} ms`);
    console.log(
      `submission ${i}${repeat ? " (the file unchanged: a cached repeat)" : " (after a change)"}: answered in ${r.submit_ms} ms, submit -> finished ${r.finished_ms} ms; server RSS ${r.rss_before_mb} MB before, ` +
        `peak +${r.answer_rss_peak_delta_mb} MB until answered, +${r.rss_peak_delta_mb} MB until finished, ${r.rss_after_mb} MB after (load ${r.load})`,
    );
  }
} finally {
  await server.stop();
}
const figures = {
  bench: "large-envconfig",
  targets,
  runs,
  read_validate_ms_p50: Math.round(median(readMs)),
  read_validate_heap_mb_p50: mb(median(readHeap)),
  submit_ms_p50: median(results.map((r) => r.submit_ms)),
  submit_to_finished_ms_p50: median(results.map((r) => r.finished_ms)),
  rss_peak_delta_mb_p50: median(results.map((r) => r.rss_peak_delta_mb)),
  answer_rss_peak_delta_mb_p50: median(results.map((r) => r.answer_rss_peak_delta_mb)),
  first_submit_ms: results[0]?.submit_ms,
  first_submit_to_finished_ms: results[0]?.finished_ms,
  first_rss_peak_delta_mb: results[0]?.rss_peak_delta_mb,
  first_answer_rss_peak_delta_mb: results[0]?.answer_rss_peak_delta_mb,
  repeat_submit_ms: repeated?.submit_ms,
  repeat_submit_to_finished_ms: repeated?.finished_ms,
  repeat_rss_peak_delta_mb: repeated?.rss_peak_delta_mb,
  repeat_answer_rss_peak_delta_mb: repeated?.answer_rss_peak_delta_mb,
  rss_after_mb: (repeated ?? results.at(-1))?.rss_after_mb,
  load_average: loadavg()[0],
};
console.log(
  `median of ${runs} submissions after a change: answered ${figures.submit_ms_p50} ms, submit -> finished ${figures.submit_to_finished_ms_p50} ms, ` +
    `RSS peak +${figures.answer_rss_peak_delta_mb_p50} MB until answered, +${figures.rss_peak_delta_mb_p50} MB until finished; ` +
    `the cached repeat: answered ${figures.repeat_submit_ms} ms, RSS peak +${figures.repeat_answer_rss_peak_delta_mb} MB until answered`,
);
const share = machine.report();
if (opts.json) console.log(JSON.stringify({ ...figures, ...share }));
