import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startServer } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A canary's DeployCandidate in a wave of several targets, the server SIGKILLed after some of the
 * wave's candidates are in place: the next server gives the plugin only the candidates not done
 * (the in-flight one at most again), never the earlier wave, and the rollout completes.
 */
describe("rollout crash and resume: per target within a canary wave", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "wave\n");
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
  });
  after(async () => pg?.stop());

  it("resumes the wave's candidates where they were, not restarting the targets done", async () => {
    const app = "canarywave";
    const eu = [`${app}-eu-0`];
    const us = [0, 1, 2, 3].map((i) => `${app}-us-${i}`);
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [...eu.map((host) => ({ host, labels: { region: "eu" } })), ...us.map((host) => ({ host, labels: { region: "us" } }))],
      parallel: 1,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), journal_targets: "true", delay: "400ms" },
      rollback: { enabled: true },
      retry_interval: "10ms",
      rollout: { waves: { by: ["region"], order: { region: ["eu", "us"] } }, canary: { steps: [{ set_weight: 50 }, { set_weight: 100 }] } },
    });
    for (const h of [...eu, ...us]) await ws.write(`state/${h}.release`, "1.0.0");
    const journal = async (id: string) => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
    const candidates = (calls: Awaited<ReturnType<typeof journal>>) =>
      calls.filter((j) => j.call === "deploy_candidate_target").map((j) => j.hosts[0]!);

    let server = await startServer(config, { cwd: ws.dir });
    let id: string;
    let before: string[];
    try {
      ({ id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` }));
      // Killed once wave 2 has two of its four candidates in place.
      const deadline = Date.now() + 120_000;
      for (;;) {
        before = candidates(await journal(id));
        if (before.filter((h) => us.includes(h)).length >= 2) break;
        const d = await server.api.deploy(id);
        assert.ok(["queued", "running"].includes(d.status), `the deploy ended before the kill: ${JSON.stringify(d.error)}`);
        assert.ok(Date.now() < deadline, "wave 2's candidates did not start");
        await new Promise((r) => setTimeout(r, 30));
      }
      await server.kill();
      before = candidates(await journal(id));
      server = await startServer(config, { cwd: ws.dir });
      const d = await server.api.deploy(id, 120);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      assert.deepEqual(
        d.rollout!.waves.map((w) => w.status),
        ["succeeded", "succeeded"],
      );
      const deployed = d.targets.filter((t) => t.phase === "deploy").map((t) => t.host);
      assert.deepEqual([...deployed].sort(), [...eu, ...us].sort(), "every target's candidate result is kept");
    } finally {
      await server.stop();
    }

    const calls = await journal(id);
    const doneBefore = before.filter((h) => us.includes(h));
    assert.ok(doneBefore.length >= 2 && doneBefore.length < us.length, `killed after ${doneBefore.join(",")}`);
    // The resumed DeployCandidate call of wave 2 is given only what was left (and at most the one in flight).
    const waveCalls = calls.filter((j) => j.call === "deploy_candidate" && j.hosts.some((h) => us.includes(h)));
    assert.equal(waveCalls.length, 2, `wave 2's DeployCandidate calls: ${JSON.stringify(waveCalls.map((c) => c.hosts))}`);
    assert.deepEqual(waveCalls[0]!.hosts, us);
    const again = waveCalls[1]!.hosts.filter((h) => doneBefore.includes(h));
    assert.ok(again.length <= 1, `the resumed call repeats ${again.join(",")}`);
    assert.notEqual(waveCalls[1]!.hosts[0], us[0], "the resumed call does not start again from the wave's first target");
    // Each candidate is written once (the in-flight one at most twice); wave 1 is never called again.
    const written = candidates(calls);
    for (const h of [...eu, ...us]) assert.ok([1, 2].includes(written.filter((x) => x === h).length), `${h}: ${written.join(",")}`);
    assert.ok(written.length <= eu.length + us.length + 1, written.join(","));
    const wave1 = calls
      .filter((j) => j.hosts.includes(eu[0]!) && !["candidate_weight", "deploy_candidate_target"].includes(j.call))
      .map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`);
    assert.ok(wave1.includes("promote_candidate"), wave1.join(" | "));
    assert.deepEqual(wave1, [...new Set(wave1)], "wave 1's calls ran once each");
    for (const h of [...eu, ...us]) {
      assert.equal(await readFile(ws.path("state", `${h}.release`), "utf8"), "2.0.0");
      assert.equal(await readFile(ws.path("state", `${h}.candidate`), "utf8").catch(() => ""), "");
    }
  });
});
