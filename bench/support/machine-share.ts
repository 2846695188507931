import { machineCpuWindow, treeCpuSeconds, type MachineCpu } from "./process-cpu.js";

/** Past this share of the machine's CPUs taken by processes outside the bench, its timings are not its own. */
export const othersWarnPct = 5;

/** What the machine's CPUs did while a bench ran, and how much of it the bench and its processes did not. */
export interface MachineShare {
  /** The machine's CPUs busy, percent of their time. */
  machine_busy_pct: number;
  /** The share of the machine's CPU time (percent) busy in processes outside the bench's tree: another build, a test run. */
  others_cpu_pct: number;
}

/**
 * The machine's CPUs (/proc/stat) from now until `stop`, and the share of their time busy outside
 * this process and every process it started (its servers, Postgres, plugins, CLIs, perf): another
 * program's. A build at nice 10 beside a bench made its figures the build's too, and nothing said so.
 */
export function machineShareWindow(): { stop: () => { machine: MachineCpu; others_cpu_pct: number } } {
  const machine = machineCpuWindow();
  const tree = treeCpuSeconds();
  return {
    stop: () => {
      const m = machine.stop();
      const treePct = ((treeCpuSeconds() - tree) * 100) / Math.max(1e-9, m.seconds);
      return { machine: m, others_cpu_pct: Math.max(0, Math.round((m.busy - treePct) * 10) / 10) };
    },
  };
}

/** {@link machineShareWindow} over a whole bench: `report()` prints its line, and a warning past {@link othersWarnPct}. */
export function watchMachine(): { report: () => MachineShare } {
  const window = machineShareWindow();
  return {
    report: () => {
      const { machine, others_cpu_pct } = window.stop();
      const share = { machine_busy_pct: machine.busy, others_cpu_pct };
      console.log(
        `the machine's CPUs were ${share.machine_busy_pct}% busy during the run, ${share.others_cpu_pct}% of their time in processes outside this bench`,
      );
      if (share.others_cpu_pct > othersWarnPct)
        console.log(`warning: another program took ${share.others_cpu_pct}% of the CPUs while this bench ran: its timings are not its own`);
      return share;
    },
  };
}
