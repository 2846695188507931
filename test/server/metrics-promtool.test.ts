import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { pluginMetrics } from "../../src/external/host/metrics.js";
import { registerDriftMetric } from "../../src/server/drift-metrics.js";
import { createMetrics } from "../../src/server/metrics.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** `promtool check metrics` (Prometheus's own linter, the real binary) on what manent exposes. */
async function promtool(exposition: string): Promise<{ code: number | null; output: string }> {
  const child = spawn("promtool", ["check", "metrics"], { stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const code = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  child.stdin.end(exposition);
  return { code: await code, output };
}

/** The series' names of an exposition, without their histogram suffixes. */
const families = (text: string) => new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));

describe("metrics an SRE can scrape", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }, { host: "shop-2" }],
      params: { state_dir: ws.path("state") },
      rollout: { canary: { steps: [{ set_weight: 50 }, { set_weight: 100 }] } },
    });
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("passes promtool check metrics after deploys, with the usual process and Node.js names and the fleet's, queue's, pool's and HTTP figures", async () => {
    const artifact = await ws.write("dist/app.txt", "metrics\n");
    for (const version of ["1.0.0", "2.0.0"]) {
      const { id } = await server.api.submit({ descriptor: descriptor("shop", "prod", artifact, version), descriptor_file: "shop.yml" });
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    }
    await fetch(`${server.url}/api/v1/deploys/not-an-id`);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const checked = await promtool(text);
    assert.equal(checked.code, 0, checked.output);
    assert.equal(checked.output.trim(), "", "no lint warning");

    const names = families(text);
    // Stock Node.js and process dashboards query these names.
    for (const name of [
      "process_cpu_seconds_total",
      "process_resident_memory_bytes",
      "process_open_fds",
      "process_start_time_seconds",
      "nodejs_heap_size_used_bytes",
      "nodejs_eventloop_lag_seconds",
      "nodejs_gc_duration_seconds",
      "nodejs_active_handles",
    ])
      assert.ok(names.has(name), `${name} is exposed`);
    assert.ok(![...names].some((n) => n.startsWith("manent_process_")), "no prefixed copies of the process metrics");
    assert.match(text, /^manent_deploys_in_progress\{status="queued"\} 0$/m);
    assert.match(text, /^manent_deploys_in_progress\{status="running"\} 0$/m);
    assert.match(text, /^manent_fleet_servers\{state="alive"\} 1$/m);
    assert.match(text, /^manent_database_pool_max_connections \d+$/m);
    assert.match(text, /^manent_database_pool_connections\{state="idle"\} \d+$/m);
    assert.match(text, /^manent_database_pool_waiting \d+$/m);
    assert.match(text, /^manent_work_slots\{state="held"\} 0$/m);
    assert.match(text, /^manent_work_slots\{state="waiting"\} 0$/m);
    assert.match(text, /^manent_deploy_queue_wait_seconds_count\{kind="deploy"\} 2$/m);
    assert.match(text, /^manent_http_requests_total\{method="POST",route="\/api\/v1\/deploys",code="202"\} 2$/m);
    assert.match(text, /^manent_http_requests_total\{method="GET",route="\/api\/v1\/deploys\/:id",code="400"\} 1$/m);
    assert.match(text, /^manent_canary_weight\{tenant="untenanted",application="shop",environment="prod"\} 100$/m);
    // No label whose values grow with deploys: neither a deploy's id nor a path.
    assert.doesNotMatch(text, /deploy="|path="/);
    assert.doesNotMatch(text, /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-/, "no deploy id in any label");
  });

  it("passes it with every metric family filled in, the plugin supervisors' and the drift gauge's included", async () => {
    const m = createMetrics();
    const plugin = pluginMetrics("helm", m.registry);
    plugin.up(true);
    plugin.restarted();
    plugin.consecutiveRestarts(2);
    plugin.healthCheckFailed();
    plugin.gaveUp(false);
    registerDriftMetric(m.registry, { driftedCounts: async () => [{ tenant: "t", application: "a", environment: "e", drifted: 1 }] });
    const key = { tenant: "t", application: "a", environment: "e" };
    m.engine.deployStarted("deploy", 0.2);
    m.engine.deployFinished("deploy", "succeeded", 3);
    m.engine.targetFinished("noop", "deploy", { host: "h", status: "deployed", duration_ms: 12 });
    m.engine.stepAttempt("deploy", "succeeded");
    m.engine.canaryWeight(key, 25);
    m.engine.analysisMeasured(key, { check: "errors", value: 0.01, verdict: "successful" });
    m.http.observe("GET", "/api/v1/deploys", 200, 0.003);
    m.watchStorage({
      uploadBytes: async () => new Map([["t", 10]]),
      cacheBytes: () => 5,
      deploysInProgress: async () => ({ queued: 3, running: 1 }),
      fleetServers: async () => ({ alive: 2, dead: 1 }),
      pool: { totalCount: 4, idleCount: 1, waitingCount: 0, options: { max: 20 } },
      workSlots: () => ({ held: 3, waiting: 2 }),
    });
    const text = await m.registry.metrics();
    for (const name of ["manent_plugin_up", "manent_plugin_restarts_total", "manent_drifted_targets", "manent_upload_bytes"])
      assert.ok(families(text).has(name), name);
    const checked = await promtool(text);
    assert.equal(checked.code, 0, checked.output);
    assert.equal(checked.output.trim(), "");
  });
});
