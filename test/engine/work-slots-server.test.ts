import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A server's work slots (concurrency) through a real server: deploys that wait durably hold none,
 * and a tenant with a backlog does not keep another tenant's deploy waiting behind it.
 */
describe("work slots: waiting holds none, tenants share them", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "slots\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase(), { concurrency: 1 })), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  const submit = async (tenant: string, app: string, version = "1.0.0") =>
    (await server.api.submit({ descriptor: { ...descriptor(app, "prod", artifact, version), tenant }, descriptor_file: `${app}.yml` })).id;

  it("runs a deploy while three canaries pause on a server of concurrency 1", async () => {
    const paused: string[] = [];
    for (const app of ["c1", "c2", "c3"]) {
      await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        params: { state_dir: ws.path("state") },
        rollout: { canary: { steps: [{ set_weight: 20 }, { pause: {} }, { set_weight: 100 }] } },
      });
      const id = await submit("untenanted", app);
      // Each pauses although the one before holds the server's only slot... while it works.
      await deployReaching(server.api, id, (d) => (d.rollout?.waiting ?? null) !== null, `${app} pauses`);
      paused.push(id);
    }
    await ws.write("envconfig/untenanted/plain/plain/prod.yml", {
      plugin: "noop",
      targets: [{ host: "plain-1" }],
      params: { state_dir: ws.path("state") },
    });
    const plain = await submit("untenanted", "plain");
    assert.equal((await server.api.deploy(plain, 60)).status, "succeeded");
    for (const id of paused) await server.api.rolloutCommand(id, "promote", true);
    for (const id of paused) assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
  });

  it("starts another tenant's deploy before the rest of one tenant's backlog", async () => {
    const slow = { plugin: "noop", params: { state_dir: ws.path("state"), delay: "400ms" } };
    for (let i = 1; i <= 5; i++) await ws.write(`envconfig/team-a/a${i}/a${i}/prod.yml`, { ...slow, targets: [{ host: `a${i}-1` }] });
    await ws.write("envconfig/team-b/b1/b1/prod.yml", { ...slow, targets: [{ host: "b1-1" }] });
    const backlog = [];
    for (let i = 1; i <= 5; i++) backlog.push(await submit("team-a", `a${i}`));
    const other = await submit("team-b", "b1");
    const ended = [];
    for (const id of [...backlog, other]) ended.push(await server.api.deploy(id, 60));
    assert.ok(
      ended.every((d) => d.status === "succeeded"),
      JSON.stringify(ended.map((d) => d.status)),
    );
    const started = (d: DeployRecord) => Date.parse(d.started_at!);
    const b = ended.at(-1)!;
    const aAfterB = ended.slice(0, -1).filter((a) => started(a) > started(b));
    // With one slot, team-a's first deploy (maybe its second, taken as team-b submitted) runs before it; then team-b's.
    assert.ok(aAfterB.length >= 3, `team-b started after ${5 - aAfterB.length} of team-a's 5 deploys`);
  });

  it("with tenant_share, starts another tenant's deploy while one tenant's long deploys hold their share", async () => {
    const config = await ws.write(
      "shared.yml",
      manentYml(await pg.createDatabase(), { concurrency: 2, tenant_share: 0.5, workdir: "./work-shared" }),
    );
    const shared = await startServer(config, { cwd: ws.dir });
    try {
      const long = { plugin: "noop", params: { state_dir: ws.path("state-shared"), delay: "3s" } };
      for (let i = 1; i <= 2; i++) await ws.write(`envconfig/team-a/l${i}/l${i}/prod.yml`, { ...long, targets: [{ host: `l${i}-1` }] });
      await ws.write("envconfig/team-b/quick/quick/prod.yml", {
        plugin: "noop",
        params: { state_dir: ws.path("state-shared") },
        targets: [{ host: "q-1" }],
      });
      const go = async (tenant: string, app: string) =>
        (await shared.api.submit({ descriptor: { ...descriptor(app, "prod", artifact), tenant }, descriptor_file: `${app}.yml` })).id;
      const [l1, l2] = [await go("team-a", "l1"), await go("team-a", "l2")];
      const quick = await go("team-b", "quick");
      const q = await shared.api.deploy(quick, 60);
      assert.equal(q.status, "succeeded");
      // team-a holds one slot of two (0.5): its second deploy waits, team-b's ran in the other.
      const [a1, a2] = [await shared.api.deploy(l1, 60), await shared.api.deploy(l2, 60)];
      assert.ok(Date.parse(q.finished_at!) < Date.parse(a1.finished_at!), "team-b's deploy ended while team-a's first still ran");
      assert.ok(Date.parse(a2.started_at!) >= Date.parse(a1.finished_at!) - 50, "team-a's second waited for its first");
    } finally {
      await shared.stop();
    }
  });
});
