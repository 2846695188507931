import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal, type JournalEntry } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";
import { buildSamplePlugin } from "../external/helpers.js";

/**
 * Per-target resume of the deploy step: a server SIGKILLed in the middle of a deploy's targets is
 * started again, and the plugin gets only the targets not done yet.
 */
describe("per-target resume", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
  });
  after(async () => pg?.stop());

  const journal = async (id: string): Promise<JournalEntry[]> => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
  const effects = (calls: JournalEntry[]): string[] => calls.filter((j) => j.call === "deploy_target").map((j) => j.hosts[0]!);
  const hosts = (app: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${app}-${i}`);

  /** Waits until the plugin has changed `n` more targets of the deploy than `seen` (polling its journal). */
  async function effectsReach(server: ServerProcess, id: string, n: number): Promise<number> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const count = effects(await journal(id)).length;
      if (count >= n) return count;
      const d = await server.api.deploy(id);
      if (d.status !== "running" && d.status !== "queued") return count;
      if (Date.now() > deadline)
        throw new Error(`deploy ${id} did not reach ${n} targets: ${JSON.stringify(d)}\n${server.logs().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Submits a deploy, kills the server each time the plugin changed `every` more targets (up to
   * `kills` times), starts it again, and returns the deploy once it ended, with the number of kills.
   */
  async function deployKilledRepeatedly(app: string, version: string, every: number, kills: number, total: number) {
    let server = await startServer(config, { cwd: ws.dir });
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    let killed = 0;
    let seen = 0;
    try {
      while (killed < kills) {
        const reached = await effectsReach(server, id, seen + every);
        if (reached < seen + every) break; // the deploy ended first
        // Every target changed (a slow poll on a loaded machine can see that): the deploy call has
        // nothing left to resume, so a kill now would test something else.
        if (reached >= total) break;
        seen = reached;
        await server.kill();
        killed += 1;
        server = await startServer(config, { cwd: ws.dir });
      }
      return { id, killed, deploy: await server.api.deploy(id, 120) };
    } finally {
      await server.stop();
    }
  }

  /** Deploy calls after the first: none starts again from the first target, and each repeats at most `parallel` targets already changed. */
  function assertResumed(calls: JournalEntry[], all: string[], parallel: number, killed: number): void {
    const deploys = calls.map((c, i) => ({ c, i })).filter(({ c }) => c.call === "deploy");
    assert.equal(deploys.length, killed + 1, `one deploy call per run: ${JSON.stringify(deploys.map(({ c }) => c.hosts))}`);
    assert.deepEqual(deploys[0]!.c.hosts, all);
    for (const { c, i } of deploys.slice(1)) {
      const changed = new Set(effects(calls.slice(0, i)));
      const again = c.hosts.filter((h) => changed.has(h));
      assert.ok(again.length <= parallel, `a resumed call repeats at most the targets in flight at the kill: ${again.join(",")}`);
      assert.ok(c.hosts.length < all.length - changed.size + parallel + 1, `the resumed call got ${c.hosts.length} targets`);
      assert.notEqual(c.hosts[0], all[0], "a resumed call does not start again from the first target");
    }
  }

  it("finishes a deploy of 20 slow targets killed repeatedly, each target deployed once", async () => {
    const app = "slow20";
    const all = hosts(app, 20);
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: all.map((host) => ({ host })),
      parallel: 2,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), journal_targets: "true", delay: "300ms" },
      rollback: { enabled: true },
    });
    const { id, killed, deploy } = await deployKilledRepeatedly(app, "2.0.0", 3, 4, all.length);
    assert.equal(deploy.status, "succeeded", JSON.stringify(deploy.error));
    assert.ok(killed >= 2, `killed ${killed} times`);
    const calls = await journal(id);
    // With state_dir, a target repeated after a kill is `unchanged`: no target is changed twice. The
    // plugin writes a target's state and then its journal line, so a kill between the two loses
    // that line (at most the `parallel` targets in flight per kill): such a target is changed once,
    // its line missing, and the resumed call finds it already at 2.0.0.
    const changed = effects(calls);
    assert.equal(new Set(changed).size, changed.length, `a target changed twice: ${changed.join(",")}`);
    const unjournaled = all.filter((h) => !changed.includes(h));
    assert.ok(unjournaled.length <= 2 * killed, `targets never changed: ${unjournaled.join(",")}`);
    assertResumed(calls, all, 2, killed);
    const deployed = deploy.targets.filter((t) => t.phase === "deploy");
    assert.equal(deployed.length, 20);
    for (const t of deployed) assert.ok(t.status === "deployed" || t.status === "unchanged", `${t.host}: ${t.status}`);
    for (const host of unjournaled)
      assert.equal(deployed.find((t) => t.host === host)?.status, "unchanged", `${host} was changed before a kill, found so on resume`);
    const step = deploy.steps.find((s) => s.name === "deploy")!;
    assert.equal(step.attempts, killed + 1);
    const result = JSON.parse(step.output!.result) as { targets: { host: string; status: string }[] };
    assert.deepEqual(
      result.targets.map((t) => t.host),
      all,
      "the step's result keeps the targets done before the kills",
    );
    for (const host of all) assert.equal(await readFile(ws.path("state", `${host}.release`), "utf8"), "2.0.0");
  });

  it("rolls back every target, those done before the kills too, when a later target fails", async () => {
    const app = "slowfail";
    const all = hosts(app, 12);
    const state = ws.path("state-fail");
    // A first release, that the rollback returns to.
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: all.map((host) => ({ host })),
      parallel: 4,
      params: { state_dir: state },
    });
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "1.0.0"), descriptor_file: `${app}.yml` });
      assert.equal((await server.api.deploy(id, 120)).status, "succeeded");
    } finally {
      await server.stop();
    }
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: all.map((host) => ({ host })),
      parallel: 1,
      params: { state_dir: state, journal: ws.path("journal"), journal_targets: "true", delay: "200ms", fail_hosts: all[11]! },
      rollback: { enabled: true },
    });
    const { id, killed, deploy } = await deployKilledRepeatedly(app, "2.0.0", 4, 2, all.length);
    assert.equal(deploy.status, "rolled_back", JSON.stringify(deploy.error));
    assert.equal(killed, 2);
    const calls = await journal(id);
    assertResumed(calls, all, 1, killed);
    const rollbacks = calls.filter((c) => c.call === "rollback");
    assert.equal(rollbacks.length, 1);
    assert.deepEqual(rollbacks[0]!.hosts, all, "the rollback covers the targets deployed before the kills");
    for (const host of all) assert.equal(await readFile(`${state}/${host}.release`, "utf8"), "1.0.0", host);
  });

  it("retries a failed attempt with the failed and skipped targets only", async () => {
    const app = "retry";
    const all = hosts(app, 8);
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: all.map((host) => ({ host })),
      parallel: 1,
      retry_interval: "100ms",
      params: {
        state_dir: ws.path("state"),
        journal: ws.path("journal"),
        journal_targets: "true",
        fail_hosts: all[3]!,
        fail_mode: "transient",
        fail_times: "1",
      },
    });
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` });
      const d = await server.api.deploy(id, 120);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      const deploys = (await journal(id)).filter((c) => c.call === "deploy").map((c) => c.hosts);
      assert.deepEqual(deploys, [all, all.slice(3)]);
      assert.deepEqual(effects(await journal(id)).sort(), [...all].sort());
      assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 2);
    } finally {
      await server.stop();
    }
  });

  it("resumes a wave of a rollout where its targets are", async () => {
    const app = "waves";
    const all = hosts(app, 12);
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: all.map((host, i) => ({ host, labels: { zone: `z${Math.floor(i / 4)}` } })),
      parallel: 1,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), journal_targets: "true", delay: "250ms" },
      rollout: { waves: { by: ["zone"] } },
    });
    // Killed after 6 targets (the middle of wave 2), then after 3 more (wave 3).
    const { id, killed, deploy } = await deployKilledRepeatedly(app, "2.0.0", 3, 3, all.length);
    assert.equal(deploy.status, "succeeded", JSON.stringify(deploy.error));
    assert.ok(killed >= 2, `killed ${killed} times`);
    const calls = await journal(id);
    assert.deepEqual(effects(calls).sort(), [...all].sort());
    const deploys = calls.map((c, i) => ({ c, i })).filter(({ c }) => c.call === "deploy");
    for (const [w, wave] of [all.slice(0, 4), all.slice(4, 8), all.slice(8)].entries()) {
      const forWave = deploys.filter(({ c }) => c.hosts.every((h) => wave.includes(h)));
      assert.ok(forWave.length >= 1, `wave ${w + 1} deployed`);
      assert.deepEqual(forWave[0]!.c.hosts, wave);
      for (const { c, i } of forWave.slice(1)) {
        const changed = new Set(effects(calls.slice(0, i)));
        assert.ok(c.hosts.filter((h) => changed.has(h)).length <= 1, `wave ${w + 1} resumed with ${c.hosts.join(",")}`);
        assert.notEqual(c.hosts[0], wave[0]);
      }
    }
    assert.deepEqual(
      deploy.rollout!.waves.map((w) => w.status),
      ["succeeded", "succeeded", "succeeded"],
    );
  });
  it("gives an external plugin (the TS sample) only the targets not done after each kill", async () => {
    const app = "external";
    const all = hosts(app, 10);
    const plugin = await buildSamplePlugin(ws.dir);
    await ws.write("keys/deploy-key", "the-deploy-key");
    const extConfig = await ws.write(
      "manent-external.yml",
      manentYml(await pg.createDatabase(), { workdir: "./work-external", plugins: { sample: { external: { command: plugin } } } }),
    );
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "sample",
      targets: all.map((host) => ({ host })),
      parallel: 2,
      params: { base: ws.path("ext-targets"), delay_ms: "400" },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
    });
    // What the plugin logged for each target it deployed, over every server that ran the deploy.
    const logs: string[] = [];
    const deployedHosts = (): string[] =>
      logs
        .join("\n")
        .split("\n")
        .filter((l) => l.includes('"target deployed"'))
        .map((l) => /"host":"([^"]+)"/.exec(l)?.[1] ?? "?");
    let server = await startServer(extConfig, { cwd: ws.dir });
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "4.0.0"), descriptor_file: `${app}.yml` });
    let killed = 0;
    try {
      for (let seen = 0; killed < 2;) {
        const deadline = Date.now() + 60_000;
        while (deployedHosts().length + [...server.logs().matchAll(/"target deployed"/g)].length < seen + 3) {
          if (Date.now() > deadline) throw new Error(`no progress: ${server.logs().slice(-2000)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        await server.kill();
        logs.push(server.logs());
        seen = deployedHosts().length;
        killed += 1;
        server = await startServer(extConfig, { cwd: ws.dir });
      }
      const d = await server.api.deploy(id, 120);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      logs.push(server.logs());
    } finally {
      await server.stop();
    }
    const deployed = deployedHosts();
    assert.deepEqual([...new Set(deployed)].sort(), [...all].sort());
    // Without per-target resume every restart would start again from the first target (at least 3 + 3 + 10).
    assert.ok(deployed.length <= all.length + 2 * killed, `targets deployed ${deployed.length} times: ${deployed.join(",")}`);
    for (const host of all) assert.equal((await readFile(ws.path("ext-targets", host, "current"), "utf8")).trim(), "4.0.0", host);
  });
  it("gives an external plugin (the TS sample) one DeployCandidate per target in a canary, so each candidate is recorded as it is done", async () => {
    const app = "extcanary";
    const all = hosts(app, 3);
    const plugin = await buildSamplePlugin(ws.dir);
    await ws.write("keys/deploy-key", "the-deploy-key");
    const extConfig = await ws.write(
      "manent-external-canary.yml",
      manentYml(await pg.createDatabase(), { workdir: "./work-external-canary", plugins: { sample: { external: { command: plugin } } } }),
    );
    const base = ws.path("ext-canary-targets");
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "sample",
      targets: all.map((host) => ({ host })),
      params: { base },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
      rollout: { canary: { steps: [{ set_weight: 50 }] } },
    });
    const server = await startServer(extConfig, { cwd: ws.dir });
    try {
      const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "4.1.0"), descriptor_file: `${app}.yml` });
      const d = await server.api.deploy(id, 120);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      const candidates = d.targets.filter((t) => t.phase === "deploy");
      assert.deepEqual(candidates.map((t) => `${t.host}=${t.status}`).sort(), all.map((h) => `${h}=deployed`).sort());
    } finally {
      await server.stop();
    }
    const calls = (await readFile(join(base, "rollout.jsonl"), "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { call: string }).call);
    assert.equal(calls.filter((c) => c === "DeployCandidate").length, all.length, calls.join(" "));
    assert.equal(calls.filter((c) => c === "PromoteCandidate").length, 1, calls.join(" "));
    for (const host of all) assert.equal((await readFile(ws.path("ext-canary-targets", host, "current"), "utf8")).trim(), "4.1.0", host);
  });
});
