/**
 * Whole-process start times of the two binaries, as a user meets them (spawn → exit, or spawn →
 * "listening on" for the server), each run several times; medians and p90 in milliseconds:
 *  - `node -e 0`: the floor, Node's own start;
 *  - `manent --help`, `manent status ID` with the server down (connection refused), `manent-server --help`;
 *  - the same commands' CPU time (user + system) per run, steadier than wall time on a loaded machine;
 *  - `manent-server serve` to listening, on the embedded Postgres of a workspace whose data
 *    directory already exists (a first start, which runs initdb, is done once before measuring).
 * Run: node --import tsx bench/cli-start.ts [runs] [--json]
 * With --json the last stdout line is one JSON object of the figures.
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { once } from "node:events";
import { rm } from "node:fs/promises";
import { createServer } from "node:net";
import { performance } from "node:perf_hooks";
import { cliBin, repoRoot, serverBin } from "../test/support/server-process.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const json = process.argv.includes("--json");
const runs = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 15);
const serverRuns = Math.max(3, Math.ceil(runs / 3));

const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const round = (x: number): number => Math.round(x * 10) / 10;

/** Spawn → exit, in ms; fails when the exit code is not the expected one. */
async function timeExit(args: string[], expectedCode: number): Promise<number> {
  const start = performance.now();
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  const elapsed = performance.now() - start;
  if (code !== expectedCode) throw new Error(`node ${args.join(" ")} exited ${code}, expected ${expectedCode}:\n${stderr}`);
  return elapsed;
}

/** A loopback port nobody listens on: the CLI's connection is refused at once. */
async function closedPort(): Promise<number> {
  const s = createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address() as { port: number };
  s.close();
  await once(s, "close");
  return port;
}

const clockTicks = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" })) || 100;
  } catch {
    return 100;
  }
})();
/** CPU time (user + system) a live process has used so far, in ms (Linux /proc; undefined elsewhere). */
function cpuSoFar(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
  } catch {
    return undefined;
  }
}

/**
 * Spawn → "listening on" printed, in ms, and the server's CPU time until then (its own, not the
 * embedded Postgres's); then SIGTERM and wait for the exit (not counted).
 */
async function timeServerStart(config: string, cwd: string): Promise<{ wall: number; cpu: number | undefined }> {
  const start = performance.now();
  const child = spawn(process.execPath, [serverBin, "-c", config, "serve", "--listen", "127.0.0.1:0"], {
    cwd,
    env: { ...process.env, MANENT_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const exited = once(child, "exit");
  const elapsed = await new Promise<{ wall: number; cpu: number | undefined }>((resolve, reject) => {
    // The JSON log's "listening on" line, written whatever the level.
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes("listening on")) resolve({ wall: performance.now() - start, cpu: cpuSoFar(child.pid!) });
    });
    void exited.then(([code]) => reject(new Error(`manent-server exited ${String(code)} before listening:\n${stderr}`)));
  });
  child.kill("SIGTERM");
  await exited;
  return elapsed;
}

function figures(name: string, xs: number[]): { median: number; p90: number } {
  const f = { median: round(quantile(xs, 0.5)), p90: round(quantile(xs, 0.9)) };
  console.log(`${name.padEnd(40)} median ${String(f.median).padStart(7)} ms   p90 ${String(f.p90).padStart(7)} ms   (${xs.length} runs)`);
  return f;
}

const port = await closedPort();
// Exit 3 for status: the server is unreachable (src/cli/exit-codes.ts).
const commands: [key: string, name: string, args: string[], code: number][] = [
  ["node", "node -e 0", ["-e", "0"], 0],
  ["help", "manent --help", [cliBin, "--help"], 0],
  ["status_server_down", "manent status ID (server down)", [cliBin, "--server", `http://127.0.0.1:${port}`, "status", "d-bench"], 3],
  ["server_help", "manent-server --help", [serverBin, "--help"], 0],
];
// Round robin, so a burst of load from elsewhere on the machine hits every command alike; one
// round first warms the file cache.
const times = new Map<string, number[]>(commands.map(([key]) => [key, []]));
for (let round = 0; round <= runs; round++) {
  for (const [key, , args, code] of commands) {
    const t = await timeExit(args, code);
    if (round > 0) times.get(key)!.push(t);
  }
}
const results: Record<string, { median: number; p90: number; cpu?: number }> = {};
for (const [key, name] of commands) results[key] = figures(name, times.get(key)!);

// CPU time (user + system) per run, which load from elsewhere inflates far less than wall time:
// bash's `times` after running the command n times gives its children's total.
async function cpuPerRun(args: string[], n: number): Promise<number> {
  const quoted = [process.execPath, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = spawn("bash", ["-c", `for i in $(seq ${n}); do ${quoted} >/dev/null 2>&1; done; times`], { cwd: repoRoot });
  let stdout = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  await once(child, "exit");
  const line = stdout.trim().split("\n").at(-1)!; // children's user and system time, e.g. "0m1.234s 0m0.120s"
  const seconds = [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + Number(m[1]) * 60 + Number(m[2]), 0);
  return round((seconds * 1000) / n);
}
console.log("CPU time (user + system) per run:");
for (const [key, name, args] of commands) {
  results[key]!.cpu = await cpuPerRun(args, runs);
  console.log(`${name.padEnd(40)} ${String(results[key]!.cpu).padStart(7)} ms`);
}

const ws = await createWorkspace("manent-bench-start-");
const machine = watchMachine();
try {
  const config = await ws.write("manent.yml", manentYml(process.env.TEST_DATABASE_URL));
  await timeServerStart(config, ws.dir); // the first start creates the embedded Postgres (initdb)
  const starts: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < serverRuns; i++) {
    const { wall, cpu } = await timeServerStart(config, ws.dir);
    starts.push(wall);
    if (cpu !== undefined) cpus.push(cpu);
  }
  results.server_listening = figures("manent-server serve to listening", starts);
  if (cpus.length > 0) {
    results.server_listening.cpu = round(quantile(cpus, 0.5));
    console.log(`${"  its CPU time until then (median)".padEnd(40)} ${String(results.server_listening.cpu).padStart(7)} ms`);
  }
} finally {
  await rm(ws.dir, { recursive: true, force: true });
}
const share = machine.report();
if (json) console.log(JSON.stringify({ ...share, bench: "cli-start", unit: "ms", runs, server_runs: serverRuns, ...results }));
