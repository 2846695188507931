import { execFile, spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { promisify } from "node:util";

/** perf's sampling rate here: each sample stands for 1/rate of a CPU second. */
const rate = 499;

/**
 * The whole machine's CPU samples for `seconds` (`perf record -a`, the cpu-clock event, so it
 * works in a VM without hardware counters), with call graphs for a later `perf report -i FILE`.
 * A Node process started with --perf-basic-prof has its JavaScript frames named.
 */
export async function perfRecord(file: string, seconds: number): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  await new Promise<void>((resolve, reject) => {
    const args = ["record", "-a", "-g", "-e", "cpu-clock", "-F", String(rate), "-o", file, "--", "sleep", String(seconds)];
    const child = spawn("perf", args, { stdio: "ignore" });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`perf record exited with ${code}`))));
  });
}

/**
 * Where a recording's CPU went, in ms of CPU per unit of work: per program (node, postgres, the
 * bench's own process, the idle CPUs, the rest) and, in node and postgres, by kind of code. The
 * kinds tell apart work that a second process repeats (V8's compiler warming its own copy of the
 * code, its GC) from the work itself.
 */
export async function perfBreakdown(file: string, units: number, benchPid = process.pid): Promise<Record<string, number>> {
  const { stdout } = await promisify(execFile)(
    "perf",
    [
      "report",
      "-i",
      file,
      "--no-children",
      "-g",
      "none",
      "--sort",
      "comm,pid,dso,sym",
      "--stdio",
      "-F",
      "sample,comm,pid,dso,sym",
      "-t",
      "|",
    ],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  const ms = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    if (line.startsWith("#") || !line.includes("|")) continue;
    const [samples, comm, pid, dso, sym] = line.split("|").map((s) => s.trim());
    const kind = Number.parseInt(pid!, 10) === benchPid ? "the bench" : kindOf(comm!, dso!, sym!);
    ms.set(kind, (ms.get(kind) ?? 0) + (Number(samples) * 1000) / rate / Math.max(1, units));
  }
  return Object.fromEntries([...ms].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, Math.round(v * 100) / 100]));
}

function kindOf(comm: string, dso: string, sym: string): string {
  if (comm === "swapper") return "idle";
  if (comm !== "node" && comm !== "postgres") return "other programs";
  if (sym.startsWith("[k]")) return `${comm}: kernel`;
  if (dso.startsWith("libc")) return `${comm}: libc`;
  if (comm === "postgres") return "postgres: postgres";
  if (/v8::internal::(Scaveng|.*Marking|Sweep|Heap::|MemoryAllocator|Evacuat|.*Compactor|GCTracer)/.test(sym)) return "node: V8's GC";
  if (/v8::internal::(compiler::|maglev::|baseline::|Compiler::|OptimizingCompile|Parser|Scanner|interpreter::BytecodeGenerator)/.test(sym))
    return "node: V8 compiling";
  if (sym.startsWith("[.] Builtins_")) return "node: V8's builtins (interpreter, ICs, promises)";
  if (sym.startsWith("[.] JS:") || dso.startsWith("[JIT]")) return "node: JavaScript compiled";
  return "node: node and V8, other";
}
