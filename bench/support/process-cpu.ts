import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time of processes from /proc (Linux): what a bench spends per deploy in each process, a
 * figure that holds when the machine's other work slows the run down.
 */
const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** /proc/PID/stat's fields after the command (which may hold spaces), from the third: state, ppid, ... */
function statFields(pid: number | "self"): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** The process's user and system CPU seconds (0 once it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const fields = statFields(pid);
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return 0;
  }
}

/** The user and system CPU seconds of this process's children that have ended and been waited for. */
export function endedChildrenCpuSeconds(): number {
  const fields = statFields("self");
  return (Number(fields[13]) + Number(fields[14])) / ticksPerSecond;
}

/** Every process now, by pid: its /proc/PID/stat fields (see {@link statFields}); one that ends meanwhile is left out. */
function processTable(): Map<number, string[]> {
  const table = new Map<number, string[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      table.set(Number(entry), statFields(Number(entry)));
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** The Postgres listening on `port` (its postmaster, found by its command line) and every process it started. */
export function postgresProcesses(port: number): number[] {
  const table = processTable();
  const cmdline = (pid: number): string => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
    } catch {
      return ""; // gone meanwhile
    }
  };
  const postmaster = [...table.keys()].find((pid) => {
    const line = cmdline(pid);
    return / -D /.test(line) && line.includes(` -p ${port} `) && /postgres/.test(line);
  });
  if (postmaster === undefined) return [];
  return [postmaster, ...[...table].filter(([, fields]) => Number(fields[1]) === postmaster).map(([pid]) => pid)];
}

/**
 * The CPU seconds of this process and every live process under it, each with its ended children's
 * (so a process that ended counts through its parent once waited for).
 */
export function treeCpuSeconds(root = process.pid): number {
  const table = processTable();
  let ticks = 0;
  for (const [pid, fields] of table) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = table.has(p) ? Number(table.get(p)![1]) : undefined) {
      if (p !== root) continue;
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      break;
    }
  }
  return ticks / ticksPerSecond;
}

/**
 * How much each of the processes `pids()` names at each end counted (`count(pid)`, a total that only
 * grows) between `start()` and `stop()`: a process that starts and ends in between is missed
 * (Postgres's backends live as long as the pools' connections).
 */
function countWindow(pids: () => number[], count: (pid: number) => number): { stop: () => number } {
  const before = new Map(pids().map((pid) => [pid, count(pid)]));
  return {
    stop: () => pids().reduce((sum, pid) => sum + count(pid) - (before.get(pid) ?? 0), 0),
  };
}

/** CPU seconds spent by the processes `pids()` names (see {@link countWindow}). */
export function cpuWindow(pids: () => number[]): { stop: () => number } {
  return countWindow(pids, cpuSeconds);
}

/** The process's read and write system calls so far (/proc/PID/io: syscr, syscw), zero once it is gone. */
function syscalls(pid: number): { reads: number; writes: number } {
  try {
    const io = readFileSync(`/proc/${pid}/io`, "utf8");
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? 0);
    return { reads: field("syscr"), writes: field("syscw") };
  } catch {
    return { reads: 0, writes: 0 };
  }
}

/**
 * Read and write system calls made by the processes `pids()` names (sockets included: each write
 * to Postgres's socket is one, and on loopback the sender's call also does the receiver's network
 * work); see {@link countWindow}.
 */
export function syscallWindow(pids: () => number[]): { stop: () => { reads: number; writes: number } } {
  const reads = countWindow(pids, (pid) => syscalls(pid).reads);
  const writes = countWindow(pids, (pid) => syscalls(pid).writes);
  return { stop: () => ({ reads: reads.stop(), writes: writes.stop() }) };
}

/** One thread's context switches so far (/proc/PID/task/TID/status). */
function threadSwitches(pid: number, tid: number | string): { voluntary: number; involuntary: number } {
  const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
  return {
    voluntary: Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0),
    involuntary: Number(/^nonvoluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0),
  };
}

/** The process's context switches so far, every thread's, zero once it is gone. */
function contextSwitches(pid: number): { voluntary: number; involuntary: number } {
  let voluntary = 0;
  let involuntary = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const thread = threadSwitches(pid, tid);
      voluntary += thread.voluntary;
      involuntary += thread.involuntary;
    }
  } catch {
    // gone meanwhile
  }
  return { voluntary, involuntary };
}

/**
 * Context switches of the processes `pids()` names (see {@link countWindow}; a thread that ends in
 * between takes its count with it): voluntary ones are waits (for I/O, a lock, a timer), involuntary
 * ones are the scheduler taking the CPU away.
 */
export function contextSwitchWindow(pids: () => number[]): { stop: () => { voluntary: number; involuntary: number } } {
  const voluntary = countWindow(pids, (pid) => contextSwitches(pid).voluntary);
  const involuntary = countWindow(pids, (pid) => contextSwitches(pid).involuntary);
  return { stop: () => ({ voluntary: voluntary.stop(), involuntary: involuntary.stop() }) };
}

/**
 * Wake-ups of the main threads of the processes `pids()` names (see {@link countWindow}): their
 * voluntary context switches (a main thread's id is its process's), one each time the event loop
 * sleeps and something (a timer, a socket) wakes it.
 */
export function mainThreadWakeWindow(pids: () => number[]): { stop: () => number } {
  return countWindow(pids, (pid) => {
    try {
      return threadSwitches(pid, pid).voluntary;
    } catch {
      return 0; // gone
    }
  });
}

/** The machine's CPU time by state since boot, in ticks (/proc/stat's first line). */
function machineTicks(): { busy: number; idle: number; iowait: number; steal: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8")
    .split("\n", 1)[0]!
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number) as [number, number, number, number, number, number, number, number];
  return { busy: user + nice + system + irq + softirq, idle, iowait, steal };
}

/** The machine's CPUs over a window: each state's share of their time (percent), and that time in CPU seconds. */
export interface MachineCpu {
  busy: number;
  idle: number;
  iowait: number;
  steal: number;
  seconds: number;
}

/**
 * What the whole machine's CPUs did from now until `stop`, as shares of their time (percent): busy
 * (any process, the kernel's interrupts), idle, waiting for I/O with nothing to run, and stolen by
 * the hypervisor. Says whether a run was bound by the CPUs or by something they waited for.
 */
export function machineCpuWindow(): { stop: () => MachineCpu } {
  const start = machineTicks();
  return {
    stop: () => {
      const end = machineTicks();
      const d = {
        busy: end.busy - start.busy,
        idle: end.idle - start.idle,
        iowait: end.iowait - start.iowait,
        steal: end.steal - start.steal,
      };
      const total = Math.max(1, d.busy + d.idle + d.iowait + d.steal);
      const pct = (x: number) => Math.round((x * 1000) / total) / 10;
      return { busy: pct(d.busy), idle: pct(d.idle), iowait: pct(d.iowait), steal: pct(d.steal), seconds: total / ticksPerSecond };
    },
  };
}
