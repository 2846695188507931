import assert from "node:assert/strict";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { readJournal } from "../support/journal.js";
import { startMetricsExporter, type MetricsExporter } from "../support/metrics-exporter.js";
import { TestPostgres } from "../support/postgres.js";
import { startPrometheus, type PrometheusServer } from "../support/prometheus.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Canaries judged by a real Prometheus (Debian's package) that scrapes an exporter whose error
 * rates the test sets, through a real manent-server driving the noop plugin's slot calls: a
 * healthy 10 → 50 → 100 canary is promoted, one whose error rate crosses the threshold at 50 % is
 * aborted and reverted, and an unreachable Prometheus aborts after its inconclusive limit.
 */
describe("canary with Prometheus analysis", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let exporter: MetricsExporter;
  let prometheus: PrometheusServer;
  let artifact: string;

  const errorRate = {
    query: 'max(app_error_ratio_at_weight{version="${MANENT_VERSION}", weight="${MANENT_WEIGHT}"})',
    success_condition: "result < 0.05",
  };
  const journal = async (id: string) => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
  let health: Server;
  let healthUrl: string;
  const healthAsked: string[] = [];
  const release = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8").catch(() => "");
  const envconfig = (app: string, check: Record<string, unknown>) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      retry_interval: "10ms",
      analysis: { checks: { "error-rate": check } },
      rollout: {
        canary: {
          steps: [
            { set_weight: 10 },
            { analysis: { checks: ["error-rate"] } },
            { set_weight: 50 },
            { analysis: { checks: ["error-rate"] } },
            { set_weight: 100 },
          ],
        },
      },
    });
  const prometheusCheck = (extra: Record<string, unknown> = {}, address = prometheus.url) => {
    const { query, success_condition } = errorRate;
    return { prometheus: { address, query, timeout: "2s" }, success_condition, count: 2, interval: "200ms", ...extra };
  };
  const deploy = async (app: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 120);
  };
  const calls = async (id: string) =>
    (await journal(id)).filter((j) => j.call !== "candidate_weight").map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`);

  before(async () => {
    exporter = await startMetricsExporter();
    // 1.0.0 and 2.0.0 are healthy under any load; 3.0.0 fails under load: fine at 10 %, 30 % errors at 50 %.
    for (const w of [10, 50, 100]) for (const v of ["1.0.0", "2.0.0"]) exporter.errorRatioAtWeight(v, w, 0.01);
    exporter.errorRatioAtWeight("3.0.0", 10, 0.01);
    exporter.errorRatioAtWeight("3.0.0", 50, 0.3);
    [pg, prometheus, ws] = await Promise.all([TestPostgres.start(), startPrometheus({ targets: [exporter.target] }), createWorkspace()]);
    // Every series scraped: the analysis sees data from its first measurement.
    await prometheus.waitFor("count(app_error_ratio_at_weight)", (v) => v === 8);
    // The candidate's health endpoint: version 3.0.0 reports itself degraded.
    health = createServer((req, res) => {
      const version = new URL(req.url!, "http://x").searchParams.get("version") ?? "";
      healthAsked.push(version);
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ checks: { db: version === "3.0.0" ? "degraded" : "up" } }));
    });
    health.listen(0, "127.0.0.1");
    await once(health, "listening");
    healthUrl = `http://127.0.0.1:${(health.address() as AddressInfo).port}/health?version=\${MANENT_VERSION}`;
    artifact = await ws.write("dist/app.txt", "canary\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
    await prometheus?.stop();
    await exporter?.stop();
    health?.close();
  });

  it("promotes a healthy canary 10 → 50 → 100, recording every measurement", async () => {
    await envconfig("healthy", prometheusCheck());
    assert.equal((await deploy("healthy", "1.0.0")).status, "succeeded");
    const d = await deploy("healthy", "2.0.0");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const made = await calls(d.id);
    for (const w of [10, 50, 100]) assert.ok(made.includes(`set_candidate_weight weight=${w}`), made.join(", "));
    assert.deepEqual(made.slice(-2), ["promote_candidate", "retire_previous"]);
    const measurements = d.rollout!.measurements;
    assert.equal(measurements.length, 4, JSON.stringify(measurements));
    for (const m of measurements) {
      assert.equal(m.check, "error-rate");
      assert.equal(m.verdict, "successful", m.message);
      assert.equal(m.value, 0.01);
      assert.ok(!Number.isNaN(Date.parse(m.at)));
    }
    assert.deepEqual([d.rollout!.canary!.phase, d.rollout!.canary!.weight], ["promoted", 100]);
    assert.equal(await release("healthy-1"), "2.0.0");
  });

  it("aborts and reverts when the error rate crosses the threshold, naming the check, the value and the condition", async () => {
    await envconfig("failing", prometheusCheck());
    assert.equal((await deploy("failing", "1.0.0")).status, "succeeded");
    const d = await deploy("failing", "3.0.0");
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.match(d.error!.message, /error-rate: 0\.3 does not meet success_condition "result < 0\.05"/);
    assert.match(d.error!.message, /canary step 4/);
    const made = await calls(d.id);
    assert.ok(!made.includes("set_candidate_weight weight=100") && !made.includes("promote_candidate"), made.join(", "));
    assert.equal(made.at(-1), "revert_candidate");
    assert.ok(made.includes("set_candidate_weight weight=0"), made.join(", "));
    const verdicts = d.rollout!.measurements.map((m) => [m.value, m.verdict]);
    assert.deepEqual(verdicts, [
      [0.01, "successful"],
      [0.01, "successful"],
      [0.3, "failed"],
    ]);
    assert.deepEqual([d.rollout!.canary!.phase, d.rollout!.canary!.weight], ["reverted", 0]);
    assert.equal(await release("failing-1"), "1.0.0");
  });

  it("aborts after inconclusive_limit when Prometheus is unreachable", async () => {
    const gone = await startPrometheus({ targets: [exporter.target] });
    await gone.stop(); // its port now refuses connections
    await envconfig("blind", prometheusCheck());
    assert.equal((await deploy("blind", "1.0.0")).status, "succeeded");
    await envconfig("blind", prometheusCheck({ inconclusive_limit: 1 }, gone.url));
    const d = await deploy("blind", "2.0.0");
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.match(
      d.error!.message,
      /error-rate: Prometheus at http:\/\/127\.0\.0\.1:\d+ unreachable: .*\(2 inconclusive measurements, inconclusive_limit 1\)/,
    );
    assert.deepEqual(
      d.rollout!.measurements.map((m) => m.verdict),
      ["inconclusive", "inconclusive"],
    );
    const made = await calls(d.id);
    assert.ok(!made.includes("set_candidate_weight weight=50"), made.join(", "));
    assert.equal(made.at(-1), "revert_candidate");
    assert.equal(await release("blind-1"), "1.0.0");
  });

  it("an HTTP check of the candidate's health, with the version in its URL, promotes or aborts", async () => {
    const check = { http: { url: healthUrl, json_field: "checks.db" }, success_condition: 'result == "up"', interval: "100ms" };
    await envconfig("web", check);
    assert.equal((await deploy("web", "2.0.0")).status, "succeeded");
    const bad = await deploy("web", "3.0.0");
    assert.equal(bad.status, "rolled_back", JSON.stringify(bad.error));
    assert.match(
      bad.error!.message,
      /canary step 2 .*error-rate: checks\.db = "degraded" does not meet success_condition "result == "up""/,
    );
    assert.deepEqual(
      bad.rollout!.measurements.map((m) => [m.value, m.verdict]),
      [["degraded", "failed"]],
    );
    assert.ok(healthAsked.includes("3.0.0"), healthAsked.join(", "));
    assert.equal(await release("web-1"), "2.0.0");
  });
});
