/**
 * Progressive delivery, on a real manent-server with the embedded Postgres and the noop plugin (which
 * does no work, so what is measured is manent's):
 *  1. 10,000 targets in 10 waves (a `zone` label with 10 values, `parallel: 100`): wall time, submit → finished,
 *     and the same targets in one deploy without waves for comparison;
 *  2. a 10-step canary with no pauses (10 weights) on one target, against a plain deploy of the same
 *     target: the engine's overhead of the canary (median of the workflow times' difference).
 * Run: node --import tsx bench/rollouts.ts [runs] [--json]
 * With --json the last stdout line is one JSON object of the figures (bench/table.ts reads it).
 */
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const json = process.argv.includes("--json");
const runs = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 5);
const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(undefined));
await ws.write("envconfig/untenanted/fleet/fleet/bench.yml", {
  plugin: "noop",
  targets: Array.from({ length: 10_000 }, (_, i) => ({ host: `t${i}`, labels: { zone: `z${i % 10}` } })),
  params: {},
  parallel: 100,
  rollout: { waves: { by: ["zone"] } },
});
await ws.write("envconfig/untenanted/flat/flat/bench.yml", {
  plugin: "noop",
  targets: Array.from({ length: 10_000 }, (_, i) => ({ host: `f${i}` })),
  params: {},
  parallel: 100,
});
await ws.write("envconfig/untenanted/plain/plain/bench.yml", { plugin: "noop", targets: [{ host: "p0" }], params: {} });
await ws.write("envconfig/untenanted/canary/canary/bench.yml", {
  plugin: "noop",
  targets: [{ host: "c0" }],
  params: {},
  rollout: { canary: { steps: Array.from({ length: 10 }, (_, i) => ({ set_weight: (i + 1) * 10 })) } },
});

const server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
const ms = (a: string | null, b: string | null): number => Date.parse(b!) - Date.parse(a!);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const run = async (app: string, version: string) => {
  const { id } = await server.api.submit({ descriptor: descriptor(app, "bench", artifact, version), descriptor_file: "bench" });
  const d = await server.api.deploy(id, 300);
  if (d.status !== "succeeded") throw new Error(`${app} ${id} ${d.status}: ${d.error?.message}`);
  return d;
};
const machine = watchMachine();
try {
  // Warm the plugin, the pools and the artifact cache.
  await run("plain", "0.0.0");
  await run("canary", "0.0.0");

  const fleet = await run("fleet", "1.0.0");
  console.log(`10,000 no-op targets in ${fleet.rollout!.waves.length} waves, parallel 100:`);
  console.log(
    `  submit -> finished   ${ms(fleet.created_at, fleet.finished_at)} ms   (workflow ${ms(fleet.started_at, fleet.finished_at)} ms)`,
  );
  const flat = await run("flat", "1.0.0");
  console.log(`  the same without waves: ${ms(flat.created_at, flat.finished_at)} ms (what the waves add is the difference)`);

  const plain: number[] = [];
  const canary: number[] = [];
  for (let i = 1; i <= runs; i++) {
    const p = await run("plain", `1.0.${i}`);
    plain.push(ms(p.started_at, p.finished_at));
    const c = await run("canary", `1.0.${i}`);
    canary.push(ms(c.started_at, c.finished_at));
  }
  console.log(`10-step canary (10 weights, no pauses), 1 no-op target, ${runs} runs:`);
  console.log(`  canary workflow      median ${median(canary)} ms`);
  console.log(`  plain deploy         median ${median(plain)} ms`);
  console.log(`  canary overhead      median ${median(canary.map((c, i) => c - plain[i]!))} ms`);
  const share = machine.report();
  if (json) {
    const figures = {
      ...share,
      bench: "rollouts",
      runs,
      waves_10000_ms: ms(fleet.created_at, fleet.finished_at),
      waves_10000_workflow_ms: ms(fleet.started_at, fleet.finished_at),
      flat_10000_ms: ms(flat.created_at, flat.finished_at),
      canary_10_steps_workflow_ms_p50: median(canary),
      plain_workflow_ms_p50: median(plain),
      canary_overhead_ms_p50: median(canary.map((c, i) => c - plain[i]!)),
    };
    console.log(JSON.stringify(figures));
  }
} finally {
  await server.stop();
}
