import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startServer } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const steps = ["resolve", "fetch", "validate", "checkpoint", "deploy"] as const;
const points = ["before", "after", "checkpointed"] as const;

/**
 * A server killed with SIGKILL at every step boundary of a deploy, in turn, and started again:
 * the deploy completes, steps checkpointed before the kill are not run again, and only the step
 * whose effect was done but not yet checkpointed runs twice (the deploy step without calling the
 * plugin again: its targets are recorded as done). A step killed after its start was recorded
 * (`before`) starts a second attempt; a step's checkpoint is committed with the next step's start
 * (engine/step-runner.ts), so a kill right after it (`checkpointed`) leaves that next step started
 * once before the kill.
 */
/** The step whose start is committed with each step's checkpoint (the deploy step's goes with the commit gate). */
const startedWith: Partial<Record<(typeof steps)[number], (typeof steps)[number]>> = {
  resolve: "fetch",
  fetch: "validate",
  validate: "checkpoint",
};
describe("crash and resume", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;

  const journal = () => readJournal(ws.path("journal"));

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
  });
  after(async () => pg?.stop());

  for (const step of steps) {
    for (const point of points) {
      it(`completes a deploy after a kill at ${step}:${point}`, async () => {
        const app = `crash-${step}-${point}`;
        await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
          plugin: "noop",
          targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
          params: { state_dir: ws.path("state"), journal: ws.path("journal") },
          rollback: { enabled: true },
        });
        const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: `${step}:${point}` } });
        const { id } = await doomed.api.submit({ descriptor: descriptor(app, "prod", artifact, "3.1.4"), descriptor_file: `${app}.yml` });
        const exit = await doomed.exited;
        assert.equal(exit.signal, "SIGKILL", `server was not killed at ${step}:${point}:\n${doomed.logs().slice(-2000)}`);

        const server = await startServer(config, { cwd: ws.dir });
        try {
          const d = await server.api.deploy(id, 120);
          assert.equal(d.status, "succeeded", JSON.stringify(d.error));
          const attempts = Object.fromEntries(d.steps.map((s) => [s.name, s.attempts]));
          const twice = point === "checkpointed" ? startedWith[step] : step;
          for (const s of steps) assert.equal(attempts[s], s === twice ? 2 : 1, `${s} attempts after a kill at ${step}:${point}`);
          // Killed after the deploy step's effect, the step runs again but finds every target recorded
          // as done: the plugin is not called again (per-target resume, engine/target-resume.ts).
          const deployCalls = (await journal()).filter((j) => j.deployment === id && j.call === "deploy").length;
          assert.equal(deployCalls, 1);
          for (const host of [`${app}-1`, `${app}-2`]) assert.equal(await readFile(ws.path("state", `${host}.release`), "utf8"), "3.1.4");
        } finally {
          await server.stop();
        }
      });
    }
  }

  it("completes 20 deploys in flight when the server is killed", async () => {
    const apps = Array.from({ length: 20 }, (_, i) => `fleet-${i}`);
    for (const app of apps) {
      await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-a` }, { host: `${app}-b` }, { host: `${app}-c` }],
        params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay: "400ms" },
      });
    }
    // The first deploy to finish its effect kills the server; the others are at every other stage.
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "deploy:after" } });
    // Submitted at once: the first deploy needs over a second to reach the kill, all are accepted well before.
    const ids = (
      await Promise.all(
        apps.map((app) => doomed.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` })),
      )
    ).map((s) => s.id);
    assert.equal((await doomed.exited).signal, "SIGKILL");

    const server = await startServer(config, { cwd: ws.dir });
    try {
      const deploys = await Promise.all(ids.map((id) => server.api.deploy(id, 120)));
      assert.deepEqual(
        deploys.map((d) => d.status),
        apps.map(() => "succeeded"),
      );
      const calls = await journal();
      for (const id of ids) {
        const n = calls.filter((j) => j.deployment === id && j.call === "deploy").length;
        assert.ok(n >= 1 && n <= 2, `deploy ${id} ran ${n} times`);
      }
      for (const app of apps) {
        for (const t of ["a", "b", "c"]) assert.equal(await readFile(ws.path("state", `${app}-${t}.release`), "utf8"), "2.0.0");
      }
    } finally {
      await server.stop();
    }
  });
});
