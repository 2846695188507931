import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { deployCalls } from "../support/journal.js";
import { ServerFixture } from "../support/server-fixture.js";
import { descriptor, type Workspace } from "../support/workspace.js";

/**
 * Generated canary steps (Flagger's step_weight, max_weight, interval) and abort_scale_down_delay,
 * through a real manent-server and the noop plugin's slot calls; the delay across a server killed
 * with SIGKILL while the aborted candidate is kept.
 */
describe("rollout canary: generated steps and abort_scale_down_delay", () => {
  const fx = new ServerFixture();
  let ws: Workspace;
  let config: string;
  let server: ServerProcess;
  let artifact: string;

  const calls = (id: string) => deployCalls(ws.path("journal"), id);
  const state = (host: string, kind: string) => readFile(ws.path("state", `${host}.${kind}`), "utf8").catch(() => "");
  const envconfig = (app: string, canary: Record<string, unknown>, params: Record<string, string> = {}) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...params },
      rollback: { enabled: true },
      retry_interval: "10ms",
      analysis: { checks: { always: { http: { url: "http://127.0.0.1:9/none" }, count: 1 } } },
      rollout: { canary },
    });
  const submit = (api: ServerProcess["api"], app: string, version: string) =>
    api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });

  before(async () => {
    // Without the scale capability, a weight is one plugin call.
    ({ ws, server, config, artifact } = await fx.start("generated\n", {
      plugins: { noop: { artifact_types: ["file"], without: ["scale"] } },
    }));
  });
  after(() => fx.stop());

  it("step_weight 30 up to max_weight 80 every interval: weights 30, 60, 80, each held, then the promote", async () => {
    await envconfig("gen", { step_weight: 30, max_weight: 80, interval: "20ms" });
    const { id } = await submit(server.api, "gen", "2.0.0");
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(d.rollout!.canary!.steps, [
      "set_weight 30",
      "pause 20ms",
      "set_weight 60",
      "pause 20ms",
      "set_weight 80",
      "pause 20ms",
    ]);
    assert.deepEqual(await calls(id), [
      "prepare_slots",
      "deploy_candidate",
      "set_candidate_weight weight=30",
      "set_candidate_weight weight=60",
      "set_candidate_weight weight=80",
      "promote_candidate",
      "retire_previous",
    ]);
    assert.deepEqual(
      d.steps.filter((s) => s.name.endsWith(":pause")).map((s) => s.name),
      ["canary-2:pause", "canary-4:pause", "canary-6:pause"],
    );
  });

  it("refuses steps written both ways, and the generated form without step_weight or interval, naming the field", async () => {
    for (const [canary, message] of [
      [
        { steps: [{ set_weight: 10 }], step_weight: 10, interval: "1m" },
        /rollout\.canary\.steps: steps and step_weight, interval are two ways to write the canary's steps: use either steps or step_weight \(with max_weight, interval\), not both/,
      ],
      [{ max_weight: 50, interval: "1m" }, /rollout\.canary\.max_weight: max_weight generates steps with step_weight: set step_weight too/],
      [{ step_weight: 10 }, /rollout\.canary\.interval: step_weight needs interval/],
      [{ step_weight: 60, max_weight: 50, interval: "1m" }, /rollout\.canary\.max_weight: max_weight 50 is below step_weight 60/],
      [{ step_weight: 10, interval: "1m", step_analysis: { checks: ["nope"] } }, /no check named "nope"/],
    ] as const) {
      await envconfig("genbad", canary);
      await assert.rejects(submit(server.api, "genbad", "2.0.0"), message, JSON.stringify(canary));
    }
    assert.deepEqual(
      (await server.api.list({})).deploys.filter((d) => d.application === "genbad"),
      [],
      "nothing submitted",
    );
  });

  it("abort_scale_down_delay keeps the aborted candidate, across a server killed meanwhile, and removes it after the delay", async () => {
    await envconfig("keep", { steps: [{ set_weight: 10 }, { set_weight: 50 }], abort_scale_down_delay: "3s" }, { fail_at_weight: "50" });
    await ws.write("state/keep-1.release", "1.0.0");
    // Alone on the database: the server that dies at the fault point must be the one running the deploy.
    await server.stop();
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "revert:keep_candidate:after" } });
    const { id } = await submit(doomed.api, "keep", "2.0.0");
    const exit = await doomed.exited;
    assert.equal(exit.signal, "SIGKILL", `server was not killed while keeping the candidate:\n${doomed.logs().slice(-3000)}`);
    // Killed while the candidate is kept: traffic is off it, and it is still there.
    assert.deepEqual((await calls(id)).slice(-2), ["set_candidate_weight weight=50", "set_candidate_weight weight=0"]);
    assert.equal(await state("keep-1", "candidate"), "2.0.0");

    const again = await startServer(config, { cwd: ws.dir });
    try {
      const d = await again.api.deploy(id, 60);
      assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
      assert.deepEqual((await calls(id)).slice(-2), ["set_candidate_weight weight=0", "revert_candidate"]);
      assert.equal(await state("keep-1", "candidate"), "");
      assert.equal(await state("keep-1", "release"), "1.0.0");
      const kept = d.steps.find((s) => s.name === "revert:keep_candidate");
      assert.ok(kept, d.steps.map((s) => s.name).join(", "));
      assert.equal(kept.attempts, 1, "the delay started once: the restart waited only for what remained");
      assert.equal(kept.status, "succeeded");
    } finally {
      await again.stop();
    }
  });
});
