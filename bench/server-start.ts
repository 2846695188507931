/**
 * Issue 31, item 4: `manent-server serve` from spawn to listening, as the tests' startServer meets
 * it (every server-based test file pays it at least once per server), on one database that is
 * already migrated; the server's CPU time (user + system, /proc/PID/stat) until then; and the CPU
 * time of whole CLI runs, `manent --version` and `manent history` against that server (bash's
 * `times`, children's user + system). With --ref COMMIT, that commit's binaries and this
 * checkout's alternate run by run in one process, so both see the same machine load; medians and
 * minimums in milliseconds. Prints the load average at the start and the end.
 *
 * Run: node --import tsx bench/server-start.ts [runs] [--ref COMMIT] [--json]
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startServer, serverBin, cliBin } from "../test/support/server-process.js";
import { TestPostgres } from "../test/support/postgres.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { checkoutRef } from "./support/ref-checkout.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts, positionals } = parseArgs({
  options: { ref: { type: "string" }, json: { type: "boolean", default: false } },
  allowPositionals: true,
});
const runs = Number(positionals[0] ?? 6);

const clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" })) || 100;
/** CPU time (user + system) a live process has used so far, in ms (Linux /proc). */
function cpuSoFar(pid: number): number {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
}

/** CPU time (user + system) of one whole run of `node args`, in ms: bash's `times` after it, its children's total. */
async function cpuOfRun(args: string[]): Promise<number> {
  const quoted = [process.execPath, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = spawn("bash", ["-c", `${quoted} >/dev/null 2>&1 || echo "exit $?" >&2; times`], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  await once(child, "exit");
  if (stderr) throw new Error(`node ${args.join(" ")} failed: ${stderr}`);
  const line = stdout.trim().split("\n").at(-1)!; // children's user and system time, e.g. "0m1.234s 0m0.120s"
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + (Number(m[1]) * 60 + Number(m[2])) * 1000, 0);
}

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
console.log(`load average at start: ${load()}`);
const ref = opts.ref ? await checkoutRef(opts.ref) : undefined;
const pg = await TestPostgres.start();
const machine = watchMachine();
try {
  const ws = await createWorkspace();
  const config = await ws.write("manent.yml", manentYml(await pg.createDatabase({ empty: true })));
  const bins: Record<string, { server: string; cli: string }> = {
    ...(ref && { [opts.ref!]: { server: ref.bin, cli: path.join(path.dirname(ref.bin), "manent.js") } }),
    this: { server: serverBin, cli: cliBin },
  };
  // The first start of each migrates the database and warms the file cache: not counted.
  for (const bin of Object.values(bins)) await (await startServer(config, { cwd: ws.dir, bin: bin.server })).stop();
  const series = ["wall", "cpu", "cliVersion", "cliHistory"] as const;
  const times: Record<string, Record<(typeof series)[number], number[]>> = Object.fromEntries(
    Object.keys(bins).map((k) => [k, { wall: [], cpu: [], cliVersion: [], cliHistory: [] }]),
  );
  for (let i = 0; i < runs; i++) {
    for (const [name, bin] of Object.entries(bins)) {
      const t0 = performance.now();
      const server = await startServer(config, { cwd: ws.dir, bin: bin.server });
      times[name]!.wall.push(performance.now() - t0);
      times[name]!.cpu.push(cpuSoFar(server.child.pid!));
      times[name]!.cliVersion.push(await cpuOfRun([bin.cli, "--version"]));
      times[name]!.cliHistory.push(await cpuOfRun([bin.cli, "--server", server.url, "history"]));
      await server.stop();
    }
  }
  const stat = (t: number[]): { median: number; min: number } => {
    const sorted = [...t].sort((a, b) => a - b);
    return { median: Math.round(sorted[Math.floor(sorted.length / 2)]!), min: Math.round(sorted[0]!) };
  };
  const figures = Object.fromEntries(
    Object.entries(times).map(([name, t]) => [name, Object.fromEntries(series.map((s) => [s, stat(t[s])]))]),
  );
  for (const [name, f] of Object.entries(figures)) {
    console.log(`${name.padEnd(12)} spawn → listening: median ${f.wall!.median} ms, min ${f.wall!.min} ms`);
    console.log(`${"".padEnd(12)} server CPU until listening: median ${f.cpu!.median} ms, min ${f.cpu!.min} ms`);
    console.log(`${"".padEnd(12)} manent --version CPU: median ${f.cliVersion!.median} ms, min ${f.cliVersion!.min} ms`);
    console.log(`${"".padEnd(12)} manent history CPU: median ${f.cliHistory!.median} ms, min ${f.cliHistory!.min} ms`);
  }
  console.log(`load average at end: ${load()}`);
  const share = machine.report();
  if (opts.json) console.log(JSON.stringify({ ...share, runs, figures }));
} finally {
  await pg.stop();
  await ref?.remove();
}
