/**
 * How soon an operator's command takes effect, on a real manent-server with the embedded Postgres and
 * the noop plugin: a canary paused without a duration (set_weight 10, pause, set_weight 100) is
 * promoted through the API, and the time from the promote's answer to the start of the next step
 * (canary-3:set_weight) is measured; the same for an approval given with approve, and for a promote
 * sent right after the server's LISTEN connection to Postgres was cut (as by a Postgres restart or a
 * network blip), when DBOS's notification of the message is lost: through the server running the
 * deploy, and through a second server on the same database.
 * Run: node --import tsx bench/rollout-commands.ts [runs] [--json]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { EmbeddedDatabase } from "../src/storage/embedded-postgres.js";
import type { DeployRecord } from "../src/core/engine/deploy-store.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: "boolean" } } });
const runs = Number(positionals[0] ?? 10);
const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
for (const [app, gate] of [
  ["paused", { pause: {} }],
  ["approval", { approval: {} }],
] as const) {
  await ws.write(`envconfig/untenanted/${app}/${app}/bench.yml`, {
    plugin: "noop",
    targets: [{ host: `${app}-0` }],
    params: {},
    rollout: { canary: { steps: [{ set_weight: 10 }, gate, { set_weight: 100 }] } },
  });
}
const pgDir = await mkdtemp(join(tmpdir(), "manent-bench-pg-"));
const db = await EmbeddedDatabase.start(pgDir, { debug() {}, info() {}, warn() {}, error() {} });
const server = await startServer(await ws.write("manent.yml", manentYml(db.url)), { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
const peer = await startServer(
  await ws.write("peer.yml", manentYml(db.url, { dbos: { database_url: db.url, executor_id: "peer" }, workdir: "./work-peer" })),
  { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } },
);
/** Ends the backend of DBOS's LISTEN connection: the server reconnects it, and what is notified meanwhile is not heard. */
async function cutListen(): Promise<void> {
  const admin = new pg.Client(db.url);
  await admin.connect();
  try {
    const cut = await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where query like 'LISTEN dbos_%'`);
    if (cut.rowCount !== 2) throw new Error(`expected two DBOS LISTEN connections (two servers), found ${cut.rowCount}`);
  } finally {
    await admin.end();
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const max = (xs: number[]): number => Math.max(...xs);

async function until(id: string, ok: (d: DeployRecord) => boolean): Promise<DeployRecord> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const d = await server.api.deploy(id);
    if (ok(d)) return d;
    if (Date.now() > deadline || ["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status))
      throw new Error(`deploy ${id} stuck: ${d.status}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** ms from the command's answer to the start of the step after the gate. */
async function once(
  app: "paused" | "approval",
  command: "promote" | "approve",
  version: string,
  cut = false,
  via = server,
): Promise<number> {
  const { id } = await server.api.submit({ descriptor: descriptor(app, "bench", artifact, version), descriptor_file: "bench" });
  await until(id, (d) => d.rollout?.waiting != null);
  // The wait itself starts right after the waiting state is saved: give it time to be in DBOS.recv.
  if (process.env.BENCH_SETTLE_MS) await new Promise((r) => setTimeout(r, Number(process.env.BENCH_SETTLE_MS)));
  if (cut) await cutListen();
  await via.api.rolloutCommand(id, command);
  const sent = Date.now();
  const d = await until(id, (x) => x.steps.some((s) => s.name === "canary-3:set_weight"));
  const next = d.steps.find((s) => s.name === "canary-3:set_weight")!;
  await server.api.deploy(id, 60);
  return Date.parse(next.started_at!) - sent;
}

const figures: Record<string, number> = {};
const machine = watchMachine();
try {
  await once("paused", "promote", "0.0.0");
  const promote: number[] = [];
  const approve: number[] = [];
  const cut: number[] = [];
  const cutPeer: number[] = [];
  for (let i = 1; i <= runs; i++) {
    promote.push(await once("paused", "promote", `1.0.${i}`));
    approve.push(await once("approval", "approve", `1.0.${i}`));
  }
  for (let i = 1; i <= Math.min(runs, 3); i++) {
    cut.push(await once("paused", "promote", `2.0.${i}`, true));
    // Let the LISTEN connections come back before the next run.
    await new Promise((r) => setTimeout(r, 5000));
    cutPeer.push(await once("paused", "promote", `3.0.${i}`, true, peer));
    await new Promise((r) => setTimeout(r, 5000));
  }
  figures.promote_to_next_step_ms_p50 = median(promote);
  figures.promote_to_next_step_ms_max = max(promote);
  figures.approve_to_next_step_ms_p50 = median(approve);
  figures.approve_to_next_step_ms_max = max(approve);
  figures.promote_listen_cut_to_next_step_ms_p50 = median(cut);
  figures.promote_listen_cut_via_peer_to_next_step_ms_p50 = median(cutPeer);
  console.log(
    `a paused canary promoted, ${runs} runs: promote -> next step median ${figures.promote_to_next_step_ms_p50} ms, max ${figures.promote_to_next_step_ms_max} ms`,
  );
  console.log(
    `an approval given, ${runs} runs:        approve -> next step median ${figures.approve_to_next_step_ms_p50} ms, max ${figures.approve_to_next_step_ms_max} ms`,
  );
  console.log(
    `promoted as the LISTEN connection is cut, ${cut.length} runs: promote -> next step median ${figures.promote_listen_cut_to_next_step_ms_p50} ms (${cut.join(", ")})`,
  );
  console.log(
    `  the same through a second server: median ${figures.promote_listen_cut_via_peer_to_next_step_ms_p50} ms (${cutPeer.join(", ")})`,
  );
} finally {
  await peer.stop();
  await server.stop();
  await db.stop();
  await rm(pgDir, { recursive: true, force: true });
}
const share = machine.report();
if (flags.json) console.log(JSON.stringify({ ...share, bench: "rollout-commands", runs, ...figures }));
