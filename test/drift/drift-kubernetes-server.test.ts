import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { getObj, helloManifest, pullableImages } from "../plugins/kubernetes/helpers.js";
import { KubeControlPlane, type ClusterAccess } from "../support/kube/control-plane.js";
import { toolsBin } from "../support/kube/processes.js";
import { driftEvent } from "../support/drift-events.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const manifest = `${helloManifest}---
apiVersion: v1
kind: ConfigMap
metadata: {name: hello-config}
data: {greeting: "hello", farewell: "bye"}
`;

/**
 * Periodic drift checks of a real manent-server with the kubernetes plugin on a real control plane:
 * an environment with `drift.interval` reports a Deployment scaled and a ConfigMap edited with
 * kubectl (target, object and field), counts it in the metric, and with `heal` on redeploys the
 * recorded release, taking back the fields kubectl changed.
 */
describe("drift of a Kubernetes release, checked by the server at an interval", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let kubectl: (...args: string[]) => Promise<string>;

  const envconfig = (heal: boolean) =>
    ws.write("envconfig/untenanted/hello/hello/prod.yml", {
      plugin: "kubernetes",
      targets: [{ host: cp.host, port: cp.port }],
      // force_conflicts: a heal takes back the fields kubectl's edits now own.
      params: { namespace: "hello", token_secret: "kube-token", ca_secret: "kube-ca", "var.REPLICAS": "3", force_conflicts: "true" },
      secrets: [
        { name: "kube-token", ref: `file:${ws.path("k8s/token")}` },
        { name: "kube-ca", ref: `file:${ws.path("k8s/ca.crt")}` },
      ],
      drift: { interval: "1s", heal },
    });

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.clusterAdminAccount("hello");
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("k8s/token", access.token);
    const ca = await ws.write("k8s/ca.crt", access.caPem);
    await ws.write("k8s/hello-1.0.0.yaml", manifest);
    // The real kubectl of the control plane's version, as an operator would run it.
    kubectl = async (...args) =>
      (
        await promisify(execFile)(`${toolsBin}/kubectl`, [
          `--server=${cp.url}`,
          `--certificate-authority=${ca}`,
          `--token=${access.token}`,
          `--cache-dir=${join(ws.dir, "kubectl-cache")}`,
          ...args,
        ])
      ).stdout;
    const yml = manentYml(await pg.createDatabase(), { plugins: { kubernetes: {} } });
    server = await startServer(await ws.write("manent.yml", yml), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
    await cp?.stop();
  });

  it("reports a Deployment scaled and a ConfigMap edited with kubectl within its interval, naming object and field, and heals them", async () => {
    await envconfig(false);
    const { id } = await server.api.submit({
      descriptor: {
        apiVersion: "manent/v1",
        application: "hello",
        environment: "prod",
        artifact: { type: "kubernetes", name: "hello", version: "1.0.0", source: ws.path("k8s/hello-1.0.0.yaml") },
      },
      descriptor_file: "hello.yml",
    });
    const deployed = await server.api.deploy(id, 300);
    assert.equal(deployed.status, "succeeded", JSON.stringify(deployed.error));
    const first = await driftEvent(server.api, "hello", (ts) => ts.length === 1 && ts[0]!.state === "in_sync");
    assert.deepEqual(
      first.targets.map((t) => [t.deploy_id, t.live_version]),
      [[id, "1.0.0"]],
    );
    const target = first.targets[0]!.target;

    // Someone scales the Deployment and edits the ConfigMap by hand.
    await kubectl("-n", "hello", "scale", "deployment", "hello", "--replicas=5");
    await kubectl("-n", "hello", "patch", "configmap", "hello-config", "--type=merge", "-p", '{"data":{"greeting":"edited by hand"}}');
    const found = await driftEvent(server.api, "hello", (ts) => ts[0]?.state === "drifted" && ts[0].changes.length === 2, first.id);
    assert.equal(found.targets[0]!.target, target);
    assert.deepEqual(found.targets[0]!.changes, [
      { object: "ConfigMap/hello-config", field: "data.greeting", expected: "hello", live: "edited by hand" },
      { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "5" },
    ]);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /^manent_drifted_targets\{tenant="untenanted",application="hello",environment="prod"\} 1$/m);
    const { deploys: before } = await server.api.list({ application: "hello" });
    assert.equal(before.length, 1, "no heal without drift.heal");

    // Heal turned on: the server redeploys the recorded release, and the objects are the release's again.
    await envconfig(true);
    await driftEvent(server.api, "hello", (ts) => ts[0]?.state === "in_sync", found.id);
    assert.equal((await getObj(cp, "apps/v1", "Deployment", "hello"))!.spec.replicas, 3);
    assert.equal((await getObj(cp, "v1", "ConfigMap", "hello-config"))!.data!.greeting, "hello");
    const { deploys } = await server.api.list({ application: "hello" });
    const heal = deploys.find((d) => d.submitted_by === "manent drift heal");
    assert.ok(heal, JSON.stringify(deploys));
    assert.deepEqual([heal.version, heal.status], ["1.0.0", "succeeded"]);
  });

  it("leaves out the fields drift.ignore lists: a Deployment scaled by hand is not drift, and the heal of another edit keeps the replicas", async () => {
    await cp.namespace("scaled");
    await ws.write("k8s/scaled-1.0.0.yaml", manifest);
    await ws.write("envconfig/untenanted/scaled/scaled/prod.yml", {
      plugin: "kubernetes",
      targets: [{ host: cp.host, port: cp.port }],
      params: { namespace: "scaled", token_secret: "kube-token", ca_secret: "kube-ca", "var.REPLICAS": "3", force_conflicts: "true" },
      secrets: [
        { name: "kube-token", ref: `file:${ws.path("k8s/token")}` },
        { name: "kube-ca", ref: `file:${ws.path("k8s/ca.crt")}` },
      ],
      drift: { interval: "1s", heal: true, ignore: [{ kind: "Deployment", fields: ["spec.replicas"] }] },
    });
    const { id } = await server.api.submit({
      descriptor: {
        apiVersion: "manent/v1",
        application: "scaled",
        environment: "prod",
        artifact: { type: "kubernetes", name: "scaled", version: "1.0.0", source: ws.path("k8s/scaled-1.0.0.yaml") },
      },
      descriptor_file: "scaled.yml",
    });
    const deployed = await server.api.deploy(id, 300);
    assert.equal(deployed.status, "succeeded", JSON.stringify(deployed.error));
    const first = await driftEvent(server.api, "scaled", (ts) => ts.length === 1 && ts[0]!.state === "in_sync");

    // Scaled as an autoscaler would: not drift. The ConfigMap edited by hand after it: drift, healed.
    await kubectl("-n", "scaled", "scale", "deployment", "hello", "--replicas=5");
    await kubectl("-n", "scaled", "patch", "configmap", "hello-config", "--type=merge", "-p", '{"data":{"greeting":"edited by hand"}}');
    const found = await driftEvent(server.api, "scaled", (ts) => ts[0]?.state === "drifted", first.id);
    assert.deepEqual(found.targets[0]!.changes, [
      { object: "ConfigMap/hello-config", field: "data.greeting", expected: "hello", live: "edited by hand" },
    ]);
    assert.deepEqual(found.targets[0]!.ignored, [
      { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "5", reason: "drift.ignore.0" },
    ]);
    await driftEvent(server.api, "scaled", (ts) => ts[0]?.state === "in_sync", found.id);
    assert.equal((await getObj(cp, "v1", "ConfigMap", "hello-config", "scaled"))!.data!.greeting, "hello");
    assert.equal((await getObj(cp, "apps/v1", "Deployment", "hello", "scaled"))!.spec.replicas, 5);
    const { deploys } = await server.api.list({ application: "scaled" });
    const heal = deploys.find((d) => d.submitted_by === "manent drift heal");
    assert.deepEqual([heal?.version, heal?.status], ["1.0.0", "succeeded"]);
    // `manent diff` shows what it left out, and why.
    const descriptor = {
      apiVersion: "manent/v1",
      application: "scaled",
      environment: "prod",
      artifact: { type: "kubernetes", name: "scaled", version: "1.0.0", source: ws.path("k8s/scaled-1.0.0.yaml") },
    };
    await ws.write("scaled.yml", descriptor);
    const diff = await runCli(["diff", "-f", "scaled.yml", "-o", "text"], { cwd: ws.dir, server: server.url });
    assert.equal(diff.code, 0, diff.stderr);
    assert.match(
      diff.stdout,
      /: in sync \(runs 1\.0\.0\)\n {2}ignored: Deployment\/hello spec\.replicas: 3 → 5 \(drift\.ignore\.0\)\nenvconfig: a new deploy runs the release.s settings \(file \S+ sha256 [0-9a-f]{12}\)\n$/,
    );
    const { targets } = await server.api.drift({ application: "scaled" });
    assert.deepEqual(
      targets.map((t) => [t.state, t.ignored.map((c) => `${c.object} ${c.field}: ${c.live}`)]),
      [["in_sync", ["Deployment/hello spec.replicas: 5"]]],
    );
  });
});
