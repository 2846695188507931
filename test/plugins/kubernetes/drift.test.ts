import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import { toolsBin } from "../../support/kube/processes.js";
import { getObj, helloManifest, makeRequest, memoryLogger, pullableImages, scratch } from "./helpers.js";

const manifest = `${helloManifest}---
apiVersion: v1
kind: ConfigMap
metadata: {name: hello-config}
data: {greeting: "hello", farewell: "bye"}
`;

describe("kubernetes drift: the release in service against the live objects (server-side dry-run apply), on a real control plane", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  let kubectl: (...args: string[]) => Promise<string>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.clusterAdminAccount("hello");
    files = await scratch();
    const ca = join(cp.dir, "kubectl-ca.crt");
    await writeFile(ca, access.caPem);
    // The real kubectl of the control plane's version, as an operator would run it.
    kubectl = async (...args) =>
      (
        await promisify(execFile)(`${toolsBin}/kubectl`, [
          `--server=${cp.url}`,
          `--certificate-authority=${ca}`,
          `--token=${access.token}`,
          `--cache-dir=${join(cp.dir, "kubectl-cache")}`,
          ...args,
        ])
      ).stdout;
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  it("names a Deployment scaled and a ConfigMap edited with kubectl, field by field, and a deploy of the same release heals them", async () => {
    const path = await files.write("hello.yaml", manifest);
    const req = (version: string, params: Record<string, string> = {}) =>
      makeRequest({ clusters: [cp], access: [access], artifactPath: path, version, params: { "var.REPLICAS": "3", ...params } });
    await d.deploy(req("1.0.0"));

    const clean = await d.drift(req("1.0.0"));
    assert.equal(clean.length, 1);
    assert.deepEqual([clean[0]!.host, clean[0]!.status, clean[0]!.version, clean[0]!.changes], [cp.host, "in_sync", "1.0.0", []]);
    assert.equal(clean[0]!.details?.objects_checked, "3");

    await kubectl("-n", "hello", "scale", "deployment", "hello", "--replicas=5");
    await kubectl("-n", "hello", "patch", "configmap", "hello-config", "--type=merge", "-p", '{"data":{"greeting":"edited by hand"}}');

    const drifted = await d.drift(req("1.0.0"));
    assert.equal(drifted[0]!.status, "drifted");
    // In apply order: the ConfigMap before the Deployment.
    assert.deepEqual(drifted[0]!.changes, [
      { object: "ConfigMap/hello-config", field: "data.greeting", expected: "hello", live: "edited by hand" },
      { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "5" },
    ]);

    // The heal: the recorded release deployed again, taking back the fields kubectl took.
    await d.deploy(req("1.0.0", { force_conflicts: "true" }));
    const healed = await d.drift(req("1.0.0"));
    assert.deepEqual([healed[0]!.status, healed[0]!.changes], ["in_sync", []]);
    assert.equal((await getObj(cp, "apps/v1", "Deployment", "hello"))!.spec.replicas, 3);
    assert.equal((await getObj(cp, "v1", "ConfigMap", "hello-config"))!.data!.greeting, "hello");
  });

  it("reports another release in service and an object deleted by hand", async () => {
    const path = await files.write("other.yaml", manifest);
    const req = (version: string) =>
      makeRequest({
        clusters: [cp],
        access: [access],
        application: "other",
        artifactPath: path,
        version,
        params: { "var.REPLICAS": "1", namespace: "other" },
      });
    await cp.namespace("other");
    await d.deploy(req("2.0.0"));
    await kubectl("-n", "other", "delete", "configmap", "hello-config");
    const drifted = await d.drift(req("1.0.0"));
    assert.equal(drifted[0]!.version, "2.0.0");
    assert.deepEqual(drifted[0]!.changes, [
      { object: "release", field: "version", expected: "1.0.0", live: "2.0.0" },
      { object: "ConfigMap/hello-config", field: "", expected: "present", live: "" },
    ]);
  });
});
