import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startPrometheus, type PrometheusServer } from "../support/prometheus.js";
import { TestPostgres } from "../support/postgres.js";
import { repoRoot, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

/**
 * packaging/grafana/manent-server.json against a real Prometheus scraping a real server: every
 * query of every panel is valid PromQL that Prometheus evaluates, and names only metrics manent
 * exposes (the live server's, or the reference's for those that need an external plugin).
 */
describe("the Grafana dashboard", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let prometheus: PrometheusServer;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }],
      params: { state_dir: ws.path("state") },
    });
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
    const artifact = await ws.write("dist/app.txt", "dashboard\n");
    const { id } = await server.api.submit({ descriptor: descriptor("shop", "prod", artifact), descriptor_file: "shop.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    prometheus = await startPrometheus({ targets: [new URL(server.url).host] });
    // A rate needs two scrapes in its window.
    await prometheus.waitFor('count_over_time(up{job="exporter"}[1m])', (v) => (v ?? 0) >= 3);
  });
  after(async () => {
    await prometheus?.stop();
    await server?.stop();
    await pg?.stop();
  });

  it("has panels whose every query Prometheus evaluates, on metrics manent exposes", async () => {
    const dashboard = JSON.parse(await readFile(`${repoRoot}packaging/grafana/manent-server.json`, "utf8")) as {
      uid: string;
      panels: Panel[];
      templating: { list: { name: string; query: unknown }[] };
    };
    assert.equal(dashboard.uid, "manent-server");
    assert.deepEqual(
      dashboard.templating.list.map((v) => v.name),
      ["datasource", "job"],
    );
    const exposed = await (await fetch(`${server.url}/metrics`)).text();
    const families = new Set([...exposed.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const reference = await readFile(`${repoRoot}docs/reference/metrics.md`, "utf8");
    const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    assert.ok(queries.length >= 20, `${queries.length} queries`);
    // The job variable's own query, as Grafana asks it.
    const jobQuery = JSON.stringify(dashboard.templating.list[1]!.query);
    const [, jobMetric] = /label_values\((\w+), job\)/.exec(jobQuery)!;
    assert.ok(families.has(jobMetric!), `${jobMetric} is always exposed, so the job variable has values`);

    let answered = 0;
    for (const { panel, expr } of queries) {
      // What Grafana substitutes: all jobs, and a rate window of a few scrapes.
      const promql = expr.replaceAll("$job", ".+").replaceAll("$__rate_interval", "1m");
      const res = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
      assert.equal(body.status, "success", `${panel}: ${promql}: ${body.error}`);
      if ((body.data?.result.length ?? 0) > 0) answered++;
      for (const [name] of promql.matchAll(/\b(?:manent|process|nodejs)_[a-z0-9_]+/g)) {
        const family = name.replace(/_bucket$/, "");
        assert.ok(
          families.has(family) || reference.includes(`\`${family}\``),
          `${panel}: ${family} is neither exposed nor in the reference`,
        );
      }
    }
    // Most panels have data after one deploy (not those of canaries, analysis, drift, plugins or failures).
    assert.ok(answered >= queries.length / 2, `${answered} of ${queries.length} queries have data`);
  });
});
