import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { Result } from "../../src/core/contract/index.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Waves of targets by region then az through a real manent-server, the noop plugin recording every call. */
describe("rollout waves", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const journal = async (id: string) => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
  const release = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8").catch(() => "");
  const fleet = [
    { host: "eu-a1", labels: { region: "eu-west", az: "a" } },
    { host: "us-a1", labels: { region: "us-east", az: "a" } },
    { host: "eu-b1", labels: { region: "eu-west", az: "b" } },
    { host: "us-a2", labels: { region: "us-east", az: "a" } },
    { host: "eu-a2", labels: { region: "eu-west", az: "a" } },
  ];
  const envconfig = (app: string, params: Record<string, string> = {}) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: fleet,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...params },
      rollback: { enabled: true },
      parallel: 4,
      rollout: { waves: { by: ["region", "az"], order: { region: ["us-east"] } } },
    });
  const deploy = async (app: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 60);
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "waves\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("deploys one wave at a time, by region in the stated order then az", async () => {
    await envconfig("waves");
    const d = await deploy("waves", "1.0.0");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = (await journal(d.id)).filter((j) => j.call === "deploy").map((j) => j.hosts.join(","));
    assert.deepEqual(calls, ["us-a1,us-a2", "eu-a1,eu-a2", "eu-b1"]);
    assert.deepEqual(
      d.rollout!.waves.map((w) => `${w.index} ${w.name} ${w.status} ${w.hosts.join(",")}`),
      [
        "1 region=us-east az=a succeeded us-a1,us-a2",
        "2 region=eu-west az=a succeeded eu-a1,eu-a2",
        "3 region=eu-west az=b succeeded eu-b1",
      ],
    );
    assert.deepEqual(
      d.steps.map((s) => `${s.name}:${s.status}`),
      [
        "resolve:succeeded",
        "fetch:succeeded",
        "validate:succeeded",
        "checkpoint:succeeded",
        "deploy:succeeded",
        "wave-1:deploy:succeeded",
        "wave-2:deploy:succeeded",
        "wave-3:deploy:succeeded",
      ],
    );
    // The tutorial's `.steps[] | select(.name=="deploy") | .output.result | fromjson` still lists every target.
    const summary = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as Result;
    assert.deepEqual(summary.targets.map((t) => `${t.host}:${t.status}`).sort(), fleet.map((t) => `${t.host}:deployed`).sort());
    for (const t of fleet) assert.equal(await release(t.host), "1.0.0");
  });

  it("rolls back waves 1 and 2 to the checkpoint when wave 2 fails, and never touches wave 3", async () => {
    await envconfig("waves", { fail_hosts: "eu-a2" });
    const d = await deploy("waves", "2.0.0");
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.match(
      d.error!.message,
      /^wave 2 \(region=eu-west az=a\) failed: .*target eu-a2: failing as configured.*; waves 1-2 rolled back; wave 3 skipped$/,
    );
    assert.deepEqual(
      d.rollout!.waves.map((w) => w.status),
      ["rolled_back", "rolled_back", "skipped"],
    );
    const calls = (await journal(d.id)).filter((j) => j.call !== "deploy_end").map((j) => `${j.call} ${j.hosts.join(",")}`);
    assert.deepEqual(calls, ["deploy us-a1,us-a2", "deploy eu-a1,eu-a2", "rollback us-a1,us-a2,eu-a1,eu-a2"]);
    for (const t of fleet) assert.equal(await release(t.host), "1.0.0", t.host);
    const summary = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as Result;
    assert.equal(summary.targets.find((t) => t.host === "eu-b1")!.status, "skipped");
  });

  it("behaves as before without rollout settings: one deploy call, no rollout section", async () => {
    await ws.write("envconfig/untenanted/plain/plain/prod.yml", {
      plugin: "noop",
      targets: fleet,
      params: { journal: ws.path("journal") },
    });
    const d = await deploy("plain", "1.0.0");
    assert.equal(d.status, "succeeded");
    assert.equal(d.rollout, null);
    assert.deepEqual((await journal(d.id)).filter((j) => j.call === "deploy").length, 1);
  });
});
