/**
 * Issue 29, item 2: work slots and tenants (src/core/engine/work-slots.ts), on one real server
 * (concurrency --concurrency, default 50) and a real Postgres.
 *  1. --canaries canaries (one application each, tenant team-a) pause at a pause step; then team-b
 *     submits one no-op deploy: the time from its submission to its start (started_at), and to its end.
 *  2. team-a submits --backlog no-op deploys of --apps applications (each target 200 ms); once they
 *     are submitted team-b submits one: the time from its submission to its start, and how many of
 *     team-a's were still waiting then.
 *
 * Run: node --import tsx bench/fairness.ts [--concurrency 50] [--canaries 100] [--backlog 1000] [--apps 100] [--json]
 */
import { parseArgs } from "node:util";
import type { DeployRecord } from "../src/core/engine/deploy-store.js";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const machine = watchMachine();

const { values: opts } = parseArgs({
  options: {
    concurrency: { type: "string", default: "50" },
    canaries: { type: "string", default: "100" },
    backlog: { type: "string", default: "1000" },
    apps: { type: "string", default: "100" },
    json: { type: "boolean", default: false },
  },
});
const canaries = Number(opts.canaries);
const backlog = Number(opts.backlog);
const apps = Number(opts.apps);

const pgServer = await TestPostgres.start();
const ws = await createWorkspace("manent-bench-fair-");
const artifact = await ws.write("dist/app.txt", "fair\n");
const state = ws.path("state");
for (let i = 0; i < canaries; i++)
  await ws.write(`envconfig/team-a/c${i}/c${i}/prod.yml`, {
    plugin: "noop",
    targets: [{ host: `c${i}-1` }],
    params: { state_dir: state },
    rollout: { canary: { steps: [{ set_weight: 10 }, { pause: {} }, { set_weight: 100 }] } },
  });
for (let i = 0; i < apps; i++)
  await ws.write(`envconfig/team-a/a${i}/a${i}/prod.yml`, {
    plugin: "noop",
    targets: [{ host: `a${i}-1` }],
    params: { state_dir: state, delay: "200ms" },
  });
await ws.write("envconfig/team-b/b/b/prod.yml", { plugin: "noop", targets: [{ host: "b-1" }], params: { state_dir: state } });
const server = await startServer(
  await ws.write("manent.yml", manentYml(await pgServer.createDatabase({ empty: true }), { concurrency: Number(opts.concurrency) })),
  { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } },
);
const submit = async (tenant: string, app: string, version: string) =>
  (await server.api.submit({ descriptor: { ...descriptor(app, "prod", artifact, version), tenant }, descriptor_file: `${app}.yml` })).id;
const poll = async (id: string, ok: (d: DeployRecord) => boolean, timeoutMs = 600_000): Promise<DeployRecord | undefined> => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const d = await server.api.deploy(id);
    if (ok(d)) return d;
    await new Promise((r) => setTimeout(r, 20));
  }
  return undefined;
};
/** team-b's deploy: when it started and ended after its submission; null when it did not start within 60 s (then it is cancelled). */
const otherTenant = async (version: string) => {
  const submitted = Date.now();
  const id = await submit("team-b", "b", version);
  const started = await poll(id, (d) => d.started_at !== null && d.started_at !== undefined, 60_000);
  if (!started) {
    await server.api.cancel(id);
    return { start_ms: null, end_ms: null, status: "not started within 60 s" };
  }
  const ended = await server.api.deploy(id, 120);
  return {
    start_ms: Date.parse(started.started_at!) - submitted,
    end_ms: Date.parse(ended.finished_at!) - submitted,
    status: ended.status,
  };
};

// 1. Paused canaries.
const paused: string[] = [];
for (let i = 0; i < canaries; i++) paused.push(await submit("team-a", `c${i}`, "2.0.0"));
for (const id of paused) await poll(id, (d) => (d.rollout?.waiting ?? null) !== null || !["queued", "running"].includes(d.status));
const afterCanaries = await otherTenant("1.0.0");
for (const id of paused) await server.api.rolloutCommand(id, "promote", true);
for (const id of paused) await server.api.deploy(id, 120);

// 2. One tenant's backlog.
const queued: string[] = [];
await Promise.all(
  Array.from({ length: 10 }, async (_, w) => {
    for (let n = w; n < backlog; n += 10) queued.push(await submit("team-a", `a${n % apps}`, `3.${n}.0`));
  }),
);
const waitingAtSubmission = (await server.api.list({ tenant: "team-a", status: "queued", limit: "1000" })).deploys.length;
const afterBacklog = await otherTenant("2.0.0");
for (const id of queued) await server.api.deploy(id, 300);
await server.stop();
await pgServer.stop();

const figures = {
  concurrency: Number(opts.concurrency),
  canaries,
  after_canaries: afterCanaries,
  backlog,
  waiting_at_submission: waitingAtSubmission,
  after_backlog: afterBacklog,
};
const share = machine.report();
if (opts.json) process.stdout.write(`${JSON.stringify({ ...figures, ...share })}\n`);
else {
  process.stdout.write(
    `${canaries} canaries paused (concurrency ${figures.concurrency}): team-b's deploy started ${afterCanaries.start_ms} ms after its submission, ended ${afterCanaries.end_ms} ms (${afterCanaries.status})\n`,
  );
  process.stdout.write(
    `team-a's backlog of ${backlog} deploys (${waitingAtSubmission} queued then): team-b's deploy started ${afterBacklog.start_ms} ms after its submission, ended ${afterBacklog.end_ms} ms (${afterBacklog.status})\n`,
  );
}
