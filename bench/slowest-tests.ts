/**
 * Issue 31, item 4: the 20 slowest test files, by the test runner's own timings. Runs the suite as
 * scripts/test.sh does (the same files, concurrency and timeout; optionally a path filter) with a
 * second reporter (bench/support/file-times-reporter.mjs) that writes each top-level suite's file
 * and duration, adds them up per file and prints the slowest with their share of the total. Or
 * reads such a file of an earlier run (--from).
 *
 * Run: node --import tsx bench/slowest-tests.ts [--filter test/server] [--from times.jsonl] [--top 20] [--json]
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { repoRoot } from "../test/support/server-process.js";

const { values: opts } = parseArgs({
  options: {
    from: { type: "string" },
    filter: { type: "string", default: "" },
    top: { type: "string", default: "20" },
    json: { type: "boolean", default: false },
  },
});

/** Runs the suite; resolves with the reporter's file and the wall time. */
async function runSuite(filter: string): Promise<{ times: string; wallSeconds: number }> {
  const times = join(await mkdtemp(join(tmpdir(), "manent-test-times-")), "times.jsonl");
  const reporter = join(repoRoot, "bench/support/file-times-reporter.mjs");
  // scripts/test.sh's own command, with the second reporter beside its default one.
  const started = performance.now();
  const child = spawn("bash", ["scripts/test.sh", filter], {
    cwd: repoRoot,
    stdio: ["ignore", "inherit", "inherit"],
    env: {
      ...process.env,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --test-reporter=tap --test-reporter-destination=stdout --test-reporter=${reporter} --test-reporter-destination=${times}`,
    },
  });
  await new Promise((resolve) => child.once("exit", resolve));
  return { times, wallSeconds: (performance.now() - started) / 1000 };
}

const run = opts.from ? { times: opts.from, wallSeconds: undefined } : await runSuite(opts.filter);
const entries = (await readFile(run.times, "utf8"))
  .split("\n")
  .filter((l) => l.startsWith("{"))
  .map((l) => JSON.parse(l) as { file: string | null; ok: boolean; duration_ms: number });

interface FileTime {
  file: string;
  seconds: number;
  failed: number;
}
const files = new Map<string, FileTime>();
// A file that fails as a whole is named by its compiled path (scripts/compile-tests.mjs); its tests by their source's.
const compiled = /^node_modules\/\.cache\/test-js\/(.*)\.js$/;
for (const e of entries) {
  const file = e.file ? relative(repoRoot, e.file.replace(/^file:\/\//, "")).replace(compiled, "$1.ts") : "(unknown file)";
  const f = files.get(file) ?? { file, seconds: 0, failed: 0 };
  f.seconds += e.duration_ms / 1000;
  if (!e.ok) f.failed++;
  files.set(file, f);
}
const all = [...files.values()].sort((a, b) => b.seconds - a.seconds);
const total = all.reduce((sum, f) => sum + f.seconds, 0);
const top = all.slice(0, Number(opts.top));

if (opts.json) {
  process.stdout.write(
    `${JSON.stringify({ files: all.length, total_seconds: total, wall_seconds: run.wallSeconds ?? null, top }, null, 2)}\n`,
  );
} else {
  const wall = run.wallSeconds === undefined ? "" : ` in ${run.wallSeconds.toFixed(0)} s of wall time`;
  process.stdout.write(`${all.length} test files, ${total.toFixed(0)} s of test time${wall}; the ${top.length} slowest:\n`);
  for (const f of top)
    process.stdout.write(
      `${f.seconds.toFixed(1).padStart(7)} s  ${((100 * f.seconds) / total).toFixed(1).padStart(5)} %  ${f.file}${f.failed ? `  (${f.failed} failed)` : ""}\n`,
    );
}
