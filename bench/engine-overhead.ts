/**
 * Orchestration overhead of the engine, on a real manent-server with the embedded Postgres and the
 * noop plugin (which does no work, so what is measured is manent's):
 *  1. one deploy to one target, 20 times in a row: median and p90 of submit → finished (queue
 *     dispatch included) and of started → finished (the workflow's steps alone);
 *  2. one deploy to 1,000 targets with `parallel: 50`: wall time.
 * Run: node --import tsx bench/engine-overhead.ts [runs]
 */
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";

const runs = Number(process.argv[2] ?? 20);
const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(undefined));
await ws.write("envconfig/untenanted/one/one/bench.yml", { plugin: "noop", targets: [{ host: "t0" }], params: {} });
await ws.write("envconfig/untenanted/fleet/fleet/bench.yml", {
  plugin: "noop",
  targets: Array.from({ length: 1000 }, (_, i) => ({ host: `t${i}` })),
  params: {},
  parallel: 50,
});

const server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
const ms = (a: string | null, b: string | null): number => Date.parse(b!) - Date.parse(a!);
const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
try {
  // A first deploy warms the plugin, the connection pools and the artifact cache.
  await server.api.deploy((await server.api.submit({ descriptor: descriptor("one", "bench", artifact, "0.0.0"), descriptor_file: "bench" })).id, 60);
  const total: number[] = [];
  const steps: number[] = [];
  for (let i = 1; i <= runs; i++) {
    const { id } = await server.api.submit({ descriptor: descriptor("one", "bench", artifact, `1.0.${i}`), descriptor_file: "bench" });
    const d = await server.api.deploy(id, 60);
    if (d.status !== "succeeded") throw new Error(`deploy ${id} ${d.status}: ${d.error?.message}`);
    total.push(ms(d.created_at, d.finished_at));
    steps.push(ms(d.started_at, d.finished_at));
  }
  console.log(`one deploy, 1 no-op target, ${runs} runs:`);
  console.log(`  submit -> finished   median ${quantile(total, 0.5)} ms   p90 ${quantile(total, 0.9)} ms`);
  console.log(`  workflow steps only  median ${quantile(steps, 0.5)} ms   p90 ${quantile(steps, 0.9)} ms`);

  const { id } = await server.api.submit({ descriptor: descriptor("fleet", "bench", artifact, "1.0.0"), descriptor_file: "bench" });
  const d = await server.api.deploy(id, 600);
  if (d.status !== "succeeded") throw new Error(`fleet deploy ${d.status}: ${d.error?.message}`);
  const deployStep = d.steps.find((s) => s.name === "deploy")!;
  console.log(`one deploy, 1,000 no-op targets, parallel 50:`);
  console.log(`  submit -> finished   ${ms(d.created_at, d.finished_at)} ms   (deploy step ${deployStep.duration_ms} ms, ${d.targets.length} target records)`);
} finally {
  await server.stop();
}
