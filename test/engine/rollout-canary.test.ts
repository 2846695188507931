import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Percentage rollouts through a real manent-server, driving the noop plugin's slot and traffic calls. */
describe("rollout canary", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const journal = async (id: string) => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
  const state = (host: string, kind = "release") => readFile(ws.path("state", `${host}.${kind}`), "utf8").catch(() => "");
  const envconfig = (
    app: string,
    canary: Record<string, unknown>,
    params: Record<string, string> = {},
    extra: Record<string, unknown> = {},
  ) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...params },
      rollback: { enabled: true },
      retry_interval: "10ms",
      rollout: { canary },
      ...extra,
    });
  const deploy = async (app: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 60);
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "canary\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("drives the slot calls in order, passing PrepareSlots' state to every later call, and promotes", async () => {
    await envconfig("cana", { testers: true, steps: [{ set_weight: 10 }, { set_weight: 50 }, { set_weight: 100 }] });
    const d = await deploy("cana", "2.0.0");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = await journal(d.id);
    assert.deepEqual(
      calls.filter((j) => j.call !== "candidate_weight").map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`),
      [
        "prepare_slots",
        "deploy_candidate",
        "route_testers",
        "scale_candidate weight=10",
        "set_candidate_weight weight=10",
        "scale_candidate weight=50",
        "set_candidate_weight weight=50",
        "scale_candidate weight=100",
        "set_candidate_weight weight=100",
        "promote_candidate",
        "retire_previous",
      ],
    );
    for (const j of calls.slice(1)) assert.equal(j.traffic?.deployment, d.id, `${j.call} got the traffic state`);
    assert.equal(calls[0]!.traffic, undefined);
    const c = d.rollout!.canary!;
    assert.deepEqual([c.phase, c.weight, c.step], ["promoted", 100, 4]);
    assert.equal(c.testers?.header, "x-manent-candidate");
    assert.equal(c.traffic?.deployment, d.id);
    assert.equal(await state("cana-1"), "2.0.0");
    assert.equal(await state("cana-1", "candidate"), "");
  });

  it("reverts the candidate even when weight 0 fails (a candidate that never became ready), and ends rolled_back", async () => {
    await envconfig("canr", { steps: [] });
    assert.equal((await deploy("canr", "1.0.0")).status, "succeeded");
    await envconfig("canr", { steps: [{ set_weight: 10 }] }, { fail_at: "deploy_candidate", fail_at_weight: "0" });
    const d = await deploy("canr", "2.0.0");
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.match(
      d.error!.message,
      /^deploy_candidate failed: deploy_candidate: failing as configured \(fail_at\); weight 0 failed \(weight 0: failing as configured \(fail_at_weight\)\), candidate reverted$/,
    );
    const calls = (await journal(d.id)).filter((j) => j.call !== "candidate_weight").map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`);
    assert.deepEqual(calls.slice(-3), ["scale_candidate weight=0", "set_candidate_weight weight=0", "revert_candidate"]);
    assert.equal(await state("canr-1"), "1.0.0");
    assert.equal(await state("canr-1", "candidate"), "");
    assert.deepEqual([d.rollout!.canary!.phase, d.rollout!.canary!.weight], ["reverted", 0]);
  });

  it("sets weight 0 and reverts the candidate when a weight fails, naming the step", async () => {
    await envconfig("canb", { steps: [] });
    assert.equal((await deploy("canb", "1.0.0")).status, "succeeded");
    await envconfig("canb", { steps: [{ set_weight: 10 }, { set_weight: 50 }] }, { fail_at_weight: "50" });
    const d = await deploy("canb", "2.0.0");
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.match(
      d.error!.message,
      /^canary step 2 \(set_weight 50\) failed: weight 50: failing as configured \(fail_at_weight\); weight 0, candidate reverted$/,
    );
    const calls = (await journal(d.id)).map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`);
    // Traffic off first, then capacity, then the candidate goes.
    assert.deepEqual(calls.slice(-3), ["set_candidate_weight weight=0", "scale_candidate weight=0", "revert_candidate"]);
    assert.ok(!calls.includes("promote_candidate"));
    assert.equal(await state("canb-1"), "1.0.0");
    assert.equal(await state("canb-1", "candidate"), "");
    assert.deepEqual([d.rollout!.canary!.phase, d.rollout!.canary!.weight], ["reverted", 0]);
  });

  it("fails a call the plugin answers UNIMPLEMENTED without retries, and reverts", async () => {
    await envconfig(
      "canc",
      { steps: [{ set_weight: 20 }] },
      { fail_at: "promote_candidate", fail_mode: "unimplemented" },
      { max_retries: 3 },
    );
    const d = await deploy("canc", "2.0.0");
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "unimplemented");
    assert.match(d.error!.message, /^promote_candidate failed: promote_candidate: failing as configured/);
    assert.equal(d.steps.find((s) => s.name === "promote_candidate")!.attempts, 1);
    assert.equal((await journal(d.id)).filter((j) => j.call === "promote_candidate").length, 1);
  });

  it("runs an analysis step with an HTTP check: promoted when healthy, reverted naming the check, value and condition when not", async () => {
    let errorRate = 0.01;
    const seen: string[] = [];
    const web: Server = createServer((req, res) => {
      seen.push(req.url!);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error_rate: errorRate }));
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(web.address() as AddressInfo).port}/health?version=\${MANENT_VERSION}&weight=\${MANENT_WEIGHT}`;
      const analysis = {
        checks: { health: { http: { url, json_field: "error_rate" }, success_condition: "result < 0.05", interval: "50ms", count: 2 } },
      };
      const canary = { steps: [{ set_weight: 10 }, { analysis: { checks: ["health"] } }, { set_weight: 100 }] };
      await envconfig("cane", canary, {}, { analysis });
      const ok = await deploy("cane", "2.0.0");
      assert.equal(ok.status, "succeeded", JSON.stringify(ok.error));
      assert.deepEqual(
        ok.rollout!.measurements.map((m) => `${m.step} ${m.check} ${m.value} ${m.verdict}`),
        ["canary-2:analysis health 0.01 successful", "canary-2:analysis health 0.01 successful"],
      );
      assert.deepEqual(seen, ["/health?version=2.0.0&weight=10", "/health?version=2.0.0&weight=10"]);
      assert.deepEqual(
        ok.steps.filter((s) => s.name.startsWith("canary-2:")).map((s) => s.name),
        ["canary-2:analysis:1", "canary-2:analysis:2"],
      );

      errorRate = 0.3;
      const bad = await deploy("cane", "3.0.0");
      assert.equal(bad.status, "rolled_back");
      assert.match(
        bad.error!.message,
        /^canary step 2 \(analysis health\) failed: health: error_rate = 0\.3 does not meet success_condition "result < 0\.05" \(1 failed measurement, failure_limit 0\); weight 0, candidate reverted$/,
      );
      assert.equal(await state("cane-1"), "2.0.0");
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /manent_analysis_measurements_total\{check="health",verdict="successful"\} 2/);
      assert.match(metrics, /manent_analysis_measurements_total\{check="health",verdict="failed"\} 1/);
      // One series per application and environment (never per deploy): the last canary's, reverted.
      assert.match(metrics, /^manent_canary_weight\{tenant="untenanted",application="cane",environment="prod"\} 0$/m);
      assert.match(metrics, /^manent_analysis_value\{tenant="untenanted",application="cane",environment="prod",check="health"\} 0\.3$/m);
      assert.doesNotMatch(metrics, /deploy="/);
    } finally {
      web.close();
    }
  });

  it("refuses an analysis step naming a check the envconfig does not define", async () => {
    await envconfig("canf", { steps: [{ analysis: { checks: ["nope"] } }] });
    await assert.rejects(
      server.api.submit({ descriptor: descriptor("canf", "prod", artifact, "2.0.0"), descriptor_file: "canf.yml" }),
      /canf\/prod\.yml: rollout\.canary\.steps\.0\.analysis\.checks\.0: no check named "nope" in analysis\.checks \(none defined\)/,
    );
  });

  it("refuses a canary for a plugin without slots at submission, naming the field and the capability", async () => {
    const db = await pg.createDatabase();
    const other = await startServer(
      await ws.write("manent-noslots.yml", manentYml(db, { plugins: { noop: { artifact_types: ["file"], without: ["slots"] } } })),
      {
        cwd: ws.dir,
      },
    );
    try {
      await envconfig("cand", { steps: [{ set_weight: 10 }] });
      await assert.rejects(
        other.api.submit({ descriptor: descriptor("cand", "prod", artifact, "2.0.0"), descriptor_file: "cand.yml" }),
        /cand\/prod\.yml: rollout\.canary: plugin noop does not declare the slots capability/,
      );
      assert.deepEqual((await other.api.list({})).deploys, []);
    } finally {
      await other.stop();
    }
  });
});
