/**
 * Issue 31, item 4: what each test file's process costs before its tests, through tsx's loader hooks
 * against the same files compiled to JavaScript (scripts/compile-tests.mjs, as scripts/test.sh runs
 * them). Runs the test files under a filter (test/core by default: short unit tests, so the start
 * is most of their cost) with the runner both ways, alternating, and prints each run's wall time
 * and the CPU time of the runner and its children (user + system, from /proc: what holds when the
 * machine's other work slows the run down), then the CPU saved per file.
 *
 * Run: node --import tsx bench/test-file-start.ts [--filter test/core] [--runs 3] [--json]
 */
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { endedChildrenCpuSeconds } from "./support/process-cpu.js";
import { repoRoot } from "../test/support/server-process.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    filter: { type: "string", default: "test/core" },
    runs: { type: "string", default: "3" },
    json: { type: "boolean", default: false },
  },
});

async function run(command: string, args: string[]): Promise<{ wall: number; cpu: number }> {
  const cpuBefore = endedChildrenCpuSeconds();
  const started = performance.now();
  const child = spawn(command, args, { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`${command} ${args.slice(0, 4).join(" ")} … exited ${code}`);
  return { wall: (performance.now() - started) / 1000, cpu: endedChildrenCpuSeconds() - cpuBefore };
}

const files = readdirSync(join(repoRoot, "test"), { recursive: true, withFileTypes: true })
  .map((e) => relative(repoRoot, join(e.parentPath, e.name)))
  .filter((f) => f.endsWith(".test.ts") && f.startsWith(opts.filter))
  .sort();
if (files.length === 0) throw new Error(`no test file under ${opts.filter}`);
// scripts/test.sh compiles before its runner starts; so does this bench, once, outside the timings.
await run("node", ["scripts/compile-tests.mjs"]);
const compiled = files.map((f) => join("node_modules/.cache/test-js", f.replace(/\.ts$/, ".js")));
const common = ["--test", "--test-concurrency=2", "--test-reporter=dot"];
const ways = {
  tsx: () => run("node", ["--import", "tsx", ...common, ...files]),
  compiled: () => run("node", ["--enable-source-maps", ...common, ...compiled]),
};
const results: Record<keyof typeof ways, { wall: number; cpu: number }[]> = { tsx: [], compiled: [] };
const machine = watchMachine();
for (let i = 0; i < Number(opts.runs); i++) {
  for (const way of Object.keys(ways) as (keyof typeof ways)[]) results[way].push(await ways[way]());
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const summary = Object.fromEntries(
  Object.entries(results).map(([way, rs]) => [
    way,
    { wall_s: median(rs.map((r) => r.wall)), cpu_s: median(rs.map((r) => r.cpu)), runs: rs },
  ]),
) as Record<keyof typeof ways, { wall_s: number; cpu_s: number; runs: { wall: number; cpu: number }[] }>;
const savedPerFile = (summary.tsx.cpu_s - summary.compiled.cpu_s) / files.length;
const share = machine.report();
if (opts.json) {
  process.stdout.write(
    `${JSON.stringify({ ...share, filter: opts.filter, files: files.length, ...summary, cpu_saved_per_file_s: savedPerFile }, null, 2)}\n`,
  );
} else {
  process.stdout.write(`${files.length} test files under ${opts.filter}, ${opts.runs} runs each way (medians):\n`);
  for (const [way, s] of Object.entries(summary))
    process.stdout.write(
      `  ${way.padEnd(9)} wall ${s.wall_s.toFixed(2)} s, CPU ${s.cpu_s.toFixed(2)} s (runs: ${s.runs.map((r) => `${r.wall.toFixed(1)}/${r.cpu.toFixed(1)}`).join(", ")})\n`,
    );
  process.stdout.write(`  CPU saved per test file: ${savedPerFile.toFixed(2)} s\n`);
}
