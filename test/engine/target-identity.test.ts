import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../src/core/errors.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Target identity (issue 22, defect 1): two clusters written `host: 127.0.0.1` with different
 * ports are two targets when named, each deployed, resumed and rolled back by its name; without
 * names they are refused at submission, naming both entries. Through a real manent-server, the
 * noop plugin keeping each target's release under its identity.
 */
describe("target identity", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const clusters = [
    { name: "kube-a", host: "127.0.0.1", port: 6443, labels: { cluster: "a" } },
    { name: "kube-b", host: "127.0.0.1", port: 6444, labels: { cluster: "b" } },
  ];
  const journal = async (id: string) => (await readJournal(ws.path("journal"))).filter((j) => j.deployment === id);
  const release = (app: string, id: string) => readFile(ws.path("state", app, `${id}.release`), "utf8").catch(() => "");
  const envconfig = (app: string, extra: Record<string, unknown> = {}, params: Record<string, string> = {}) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: clusters,
      params: { state_dir: ws.path("state", app), journal: ws.path("journal"), ...params },
      rollback: { enabled: true },
      retry_interval: "100ms",
      ...extra,
    });
  const deploy = async (app: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 60);
  };
  const deployTargets = (d: Awaited<ReturnType<typeof deploy>>) =>
    d.targets.filter((t) => t.phase === "deploy").map((t) => `${t.host}=${t.status}`);

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "identity\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("refuses two targets on one host without names (HTTP 400 naming both entries), recording nothing", async () => {
    await ws.write("envconfig/untenanted/same/same/prod.yml", {
      plugin: "noop",
      targets: clusters.map(({ host, port }) => ({ host, port })),
      params: { state_dir: ws.path("state-refused") },
    });
    const before = (await server.api.list({ limit: "1000" })).deploys.length;
    await assert.rejects(
      server.api.submit({ descriptor: descriptor("same", "prod", artifact), descriptor_file: "same.yml" }),
      (err: unknown) =>
        err instanceof ManentError &&
        err.code === Code.InvalidArgument &&
        /envconfig\/untenanted\/same\/same\/prod\.yml: targets\.1: same identity as targets\.0 \(host 127\.0\.0\.1\): give each a distinct name/.test(
          err.message,
        ),
    );
    assert.equal((await server.api.list({ limit: "1000" })).deploys.length, before, "nothing recorded");
  });

  it("deploys both clusters on one host with different ports, each by its name", async () => {
    await envconfig("plain");
    const d = await deploy("plain", "1.0.0");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(deployTargets(d), ["kube-a=deployed", "kube-b=deployed"]);
    assert.deepEqual([await release("plain", "kube-a"), await release("plain", "kube-b")], ["1.0.0", "1.0.0"]);
    // The plugin received both targets, with their ports and names.
    assert.deepEqual(
      (await journal(d.id)).filter((j) => j.call === "deploy").map((j) => j.hosts),
      [["kube-a", "kube-b"]],
    );
  });

  it("deploys them in two waves, and rolls both back when the second cluster fails", async () => {
    await envconfig("waved", { rollout: { waves: { by: ["cluster"] } } });
    const ok = await deploy("waved", "1.0.0");
    assert.equal(ok.status, "succeeded", JSON.stringify(ok.error));
    assert.deepEqual(
      ok.rollout!.waves.map((w) => `${w.index} ${w.status} ${w.hosts.join(",")}`),
      ["1 succeeded kube-a", "2 succeeded kube-b"],
    );
    assert.deepEqual(deployTargets(ok), ["kube-a=deployed", "kube-b=deployed"]);
    assert.deepEqual(
      (await journal(ok.id)).filter((j) => j.call === "deploy").map((j) => j.hosts),
      [["kube-a"], ["kube-b"]],
    );

    // A broken 2.0.0 on kube-b: wave 2 fails (it would have "succeeded" with the second cluster skipped).
    await envconfig("waved", { rollout: { waves: { by: ["cluster"] } } }, { fail_hosts: "kube-b" });
    const bad = await deploy("waved", "2.0.0");
    assert.equal(bad.status, "rolled_back", JSON.stringify(bad));
    assert.match(bad.error!.message, /wave 2 \(cluster=b\) failed: target kube-b: failing as configured/);
    assert.deepEqual(
      bad.rollout!.waves.map((w) => `${w.index} ${w.status}`),
      ["1 rolled_back", "2 rolled_back"],
    );
    const rollback = (await journal(bad.id)).find((j) => j.call === "rollback")!;
    assert.deepEqual(rollback.hosts, ["kube-a", "kube-b"]);
    assert.equal(rollback.extra, "kube-a=1.0.0,kube-b=1.0.0");
    assert.deepEqual([await release("waved", "kube-a"), await release("waved", "kube-b")], ["1.0.0", "1.0.0"]);
  });

  it("retries only the cluster that failed, not its neighbour on the same host", async () => {
    await envconfig("retry", {}, { fail_hosts: "kube-b", fail_mode: "transient", fail_times: "1", journal_targets: "true" });
    const d = await deploy("retry", "3.0.0");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = await journal(d.id);
    assert.deepEqual(
      calls.filter((j) => j.call === "deploy").map((j) => j.hosts),
      [["kube-a", "kube-b"], ["kube-b"]],
    );
    assert.deepEqual(
      calls.filter((j) => j.call === "deploy_target").map((j) => j.hosts[0]),
      ["kube-a", "kube-b"],
    );
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 2);
    assert.deepEqual(deployTargets(d), ["kube-a=deployed", "kube-b=deployed"]);
  });

  it("rolls back by name when a user asks for the earlier version", async () => {
    // "plain" has 1.0.0; 1.1.0 then back to 1.0.0 on both clusters.
    await envconfig("plain");
    const up = await deploy("plain", "1.1.0");
    assert.equal(up.status, "succeeded", JSON.stringify(up.error));
    const { id } = await server.api.rollback({ descriptor: descriptor("plain", "prod", artifact, "1.1.0"), descriptor_file: "plain.yml" });
    const back = await server.api.deploy(id, 60);
    assert.equal(back.status, "succeeded", JSON.stringify(back.error));
    assert.deepEqual(
      back.targets.filter((t) => t.phase === "rollback").map((t) => `${t.host}=${t.status}`),
      ["kube-a=rolled_back", "kube-b=rolled_back"],
    );
    assert.deepEqual([await release("plain", "kube-a"), await release("plain", "kube-b")], ["1.0.0", "1.0.0"]);
  });
});
