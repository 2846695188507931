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
import { startServer, type ServerProcess } from "../support/server-process.js";
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
});
