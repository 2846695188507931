import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * `rollout.post_promotion_analysis` on a real server: an HTTP check against a real HTTP server the
 * test drives, measured once the canary has promoted the candidate; a failure rolls every target
 * back to the release before (the noop plugin keeps releases in a directory).
 */
describe("post-promotion analysis", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let web: Server;
  let artifact: string;
  let errorRate = 0.01;
  const seen: string[] = [];
  const state = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8").catch(() => "");
  const envconfig = (app: string, rollout: Record<string, unknown>) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
      params: { state_dir: ws.path("state") },
      rollback: { enabled: true },
      retry_interval: "10ms",
      analysis: {
        checks: {
          health: {
            http: {
              url: `http://127.0.0.1:${(web.address() as AddressInfo).port}/health?weight=\${MANENT_WEIGHT}`,
              json_field: "error_rate",
            },
            success_condition: "result < 0.05",
            interval: "50ms",
            count: 2,
          },
        },
      },
      rollout,
    });
  const deploy = async (app: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 120);
  };

  before(async () => {
    web = createServer((req, res) => {
      seen.push(req.url!);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error_rate: errorRate }));
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "post-promotion\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
    web?.close();
  });

  it("measures after the final promote: succeeded when healthy, rolled back to the previous release naming the check when not", async () => {
    await envconfig("ppa", { canary: { steps: [{ set_weight: 50 }] }, post_promotion_analysis: { checks: ["health"] } });
    const ok = await deploy("ppa", "1.0.0");
    assert.equal(ok.status, "succeeded", JSON.stringify(ok.error));
    assert.deepEqual(
      ok.rollout!.measurements.map((m) => `${m.step} ${m.check} ${m.value} ${m.verdict}`),
      ["post-promotion:analysis health 0.01 successful", "post-promotion:analysis health 0.01 successful"],
    );
    assert.deepEqual(seen, ["/health?weight=100", "/health?weight=100"], "measured once the candidate has all the traffic");
    for (const host of ["ppa-1", "ppa-2"]) assert.equal(await state(host), "1.0.0");

    errorRate = 0.3;
    const bad = await deploy("ppa", "2.0.0");
    assert.equal(bad.status, "rolled_back");
    assert.match(
      bad.error!.message,
      /^post-promotion analysis failed: health: error_rate = 0\.3 does not meet success_condition "result < 0\.05" \(1 failed measurement, failure_limit 0\); rollback completed$/,
    );
    assert.ok(
      bad.steps.some((s) => s.name === "promote_candidate" && s.status === "succeeded"),
      "it had been promoted",
    );
    assert.ok(bad.steps.some((s) => s.name === "rollback" && s.status === "succeeded"));
    // The failing round is recorded as failed, holding the measurement that failed it.
    const round = bad.steps.find((s) => s.name === "post-promotion:analysis:1");
    assert.ok(round, JSON.stringify(bad.steps.map((s) => s.name)));
    assert.equal(round.status, "failed");
    const recorded = JSON.parse((round.output as { result: string }).result) as {
      measurements: { check: string; value: number; verdict: string }[];
    };
    assert.deepEqual(
      recorded.measurements.map((m) => `${m.check} ${m.value} ${m.verdict}`),
      ["health 0.3 failed"],
    );
    assert.match(round.error!.message, /^post-promotion analysis failed: health: error_rate = 0\.3/);
    for (const host of ["ppa-1", "ppa-2"]) assert.equal(await state(host), "1.0.0", `${host} runs the previous release again`);
  });

  it("is checked at submission and by a dry run: unknown checks and bad values name the file and field", async () => {
    await envconfig("ppb", { canary: { steps: [{ set_weight: 50 }] }, post_promotion_analysis: { checks: ["nope"] } });
    for (const dry_run of [true, false]) {
      await assert.rejects(
        server.api.submit({ descriptor: descriptor("ppb", "prod", artifact, "1.0.0"), descriptor_file: "ppb.yml", dry_run }),
        /ppb\/prod\.yml: rollout\.post_promotion_analysis\.checks\.0: no check named "nope" in analysis\.checks \(known: health\)/,
      );
    }
    await envconfig("ppc", { post_promotion_analysis: { checks: [], every: "5m" } });
    await assert.rejects(
      server.api.submit({ descriptor: descriptor("ppc", "prod", artifact, "1.0.0"), descriptor_file: "ppc.yml", dry_run: true }),
      /ppc\/prod\.yml: rollout\.post_promotion_analysis/,
    );
    assert.deepEqual((await server.api.list({ application: "ppb" })).deploys, []);
  });
});
