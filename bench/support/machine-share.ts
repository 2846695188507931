import { readdirSync, readFileSync } from "node:fs";
import { machineTicks } from "./process-cpu.js";

/** Past this share of the machine's CPUs taken by processes outside the bench, its timings are not its own. */
const othersWarnPct = 5;

/** What the machine's CPUs did while a bench ran, and how much of it the bench and its processes did not. */
export interface MachineShare {
  /** The machine's CPUs busy, percent of their time. */
  machine_busy_pct: number;
  /** The share of the machine's CPU time (percent) busy in processes outside the bench's tree: another build, a test run. */
  others_cpu_pct: number;
}

/**
 * Watches the machine from now until `report()`: its CPUs' busy time (/proc/stat) against the CPU
 * time of this process and every process it started (its servers, Postgres, plugins, CLIs; one
 * that ended counts through its parent once waited for). The difference is another program's: a
 * build at nice 10 beside a bench made its figures the build's too, and nothing said so.
 */
export function watchMachine(): { report: () => MachineShare } {
  const machine0 = machineTicks();
  const tree0 = treeTicks();
  return {
    report: () => {
      const machine1 = machineTicks();
      const busy = machine1.busy - machine0.busy;
      const total = Math.max(1, busy + machine1.idle - machine0.idle + machine1.iowait - machine0.iowait + machine1.steal - machine0.steal);
      const others = Math.max(0, busy - (treeTicks() - tree0));
      const share = { machine_busy_pct: pct(busy, total), others_cpu_pct: pct(others, total) };
      console.log(
        `the machine's CPUs were ${share.machine_busy_pct}% busy during the run, ${share.others_cpu_pct}% of their time in processes outside this bench`,
      );
      if (share.others_cpu_pct > othersWarnPct)
        console.log(`warning: another program took ${share.others_cpu_pct}% of the CPUs while this bench ran: its timings are not its own`);
      return share;
    },
  };
}

const pct = (part: number, total: number) => Math.round((part * 1000) / total) / 10;

/** CPU ticks of this process and its live descendants, each with its ended children's (cutime, cstime). */
function treeTicks(): number {
  const parents = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parents.set(Number(entry), Number(fields[1]));
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]));
    } catch {
      // gone meanwhile
    }
  }
  let sum = 0;
  for (const [pid, t] of ticks) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = parents.get(p)) {
      if (p === process.pid) {
        sum += t;
        break;
      }
    }
  }
  return sum;
}
