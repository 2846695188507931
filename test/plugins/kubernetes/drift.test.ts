import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import { toolsBin } from "../../support/kube/processes.js";
import type { IgnoreRule } from "../../../src/core/contract/index.js";
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

  /** A request for an application of its own in its own namespace, with `ignore` as the envconfig's drift.ignore. */
  async function ignoring(application: string, text: string, ignore: IgnoreRule[]) {
    const path = await files.write(`${application}.yaml`, text);
    await cp.namespace(application);
    return (version: string, params: Record<string, string> = {}) => ({
      ...makeRequest({
        clusters: [cp],
        access: [access],
        application,
        artifactPath: path,
        version,
        params: { "var.REPLICAS": "3", namespace: application, ...params },
      }),
      ignore,
    });
  }

  it("with spec.replicas ignored, a Deployment scaled by hand is in sync (listed as ignored), another edit is still drift, and a heal keeps the replicas the cluster has", async () => {
    const req = await ignoring("scaled", manifest, [{ kind: "Deployment", fields: ["spec.replicas"], managers: [] }]);
    await d.deploy(req("1.0.0"));
    // As an autoscaler would.
    await kubectl("-n", "scaled", "scale", "deployment", "hello", "--replicas=5");
    const replicas = { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "5", reason: "drift.ignore.0" };
    const scaled = await d.drift(req("1.0.0"));
    assert.deepEqual([scaled[0]!.status, scaled[0]!.changes, scaled[0]!.ignored], ["in_sync", [], [replicas]]);

    // A deploy of the release, without force_conflicts: no conflict over the field kubectl took, which stays as it is.
    const generation = (await getObj(cp, "apps/v1", "Deployment", "hello", "scaled"))!.metadata.generation;
    await d.deploy(req("1.0.0"));
    const after = (await getObj(cp, "apps/v1", "Deployment", "hello", "scaled"))!;
    assert.deepEqual([after.spec.replicas, after.metadata.generation], [5, generation]);

    await kubectl("-n", "scaled", "patch", "configmap", "hello-config", "--type=merge", "-p", '{"data":{"greeting":"edited by hand"}}');
    const edited = await d.drift(req("1.0.0"));
    assert.equal(edited[0]!.status, "drifted");
    assert.deepEqual(edited[0]!.changes, [
      { object: "ConfigMap/hello-config", field: "data.greeting", expected: "hello", live: "edited by hand" },
    ]);
    assert.deepEqual(edited[0]!.ignored, [replicas]);

    // The heal takes the ConfigMap back and leaves the replicas to whoever scaled them.
    await d.deploy(req("1.0.0", { force_conflicts: "true" }));
    assert.equal((await getObj(cp, "v1", "ConfigMap", "hello-config", "scaled"))!.data!.greeting, "hello");
    assert.equal((await getObj(cp, "apps/v1", "Deployment", "hello", "scaled"))!.spec.replicas, 5);
    const healed = await d.drift(req("1.0.0"));
    assert.deepEqual([healed[0]!.status, healed[0]!.changes, healed[0]!.ignored], ["in_sync", [], [replicas]]);
  });

  it("ignores the fields a listed field manager owns, in drift and in a heal, and still reports what another manager changed", async () => {
    const req = await ignoring("managed", manifest, [{ kind: "Deployment", fields: [], managers: ["autoscaler-test"] }]);
    await d.deploy(req("1.0.0"));
    // An autoscaler of its own: the scale subresource, under its field manager.
    await kubectl(
      "-n",
      "managed",
      "patch",
      "deployment",
      "hello",
      "--subresource=scale",
      "--field-manager=autoscaler-test",
      "--type=merge",
      "-p",
      '{"spec":{"replicas":4}}',
    );
    await kubectl("-n", "managed", "patch", "deployment", "hello", "--type=merge", "-p", '{"spec":{"progressDeadlineSeconds":300}}');
    const found = await d.drift(req("1.0.0"));
    assert.equal(found[0]!.status, "drifted");
    assert.deepEqual(found[0]!.changes, [
      { object: "Deployment/hello", field: "spec.progressDeadlineSeconds", expected: "120", live: "300" },
    ]);
    assert.deepEqual(found[0]!.ignored, [
      { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "4", reason: "manager autoscaler-test (drift.ignore.0)" },
    ]);
    await d.deploy(req("1.0.0", { force_conflicts: "true" }));
    const healed = (await getObj(cp, "apps/v1", "Deployment", "hello", "managed"))!;
    assert.deepEqual([healed.spec.replicas, healed.spec.progressDeadlineSeconds], [4, 120]);
    assert.equal((await d.drift(req("1.0.0")))[0]!.status, "in_sync");
  });

  it("leaves spec.replicas to a HorizontalPodAutoscaler of the release without being told: not drift, and a deploy does not set it back", async () => {
    // The real HPA controller of the control plane: with no metrics it scales to its minimum.
    const withHpa = `${manifest}---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hello}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: hello}
  minReplicas: 4
  maxReplicas: 6
`;
    const req = await ignoring("autoscaled", withHpa, []);
    await d.deploy(req("1.0.0"));
    await kubectl("-n", "autoscaled", "wait", "deployment/hello", "--for=jsonpath={.spec.replicas}=4", "--timeout=120s");
    const found = await d.drift(req("1.0.0"));
    assert.deepEqual([found[0]!.status, found[0]!.changes], ["in_sync", []]);
    assert.deepEqual(found[0]!.ignored, [
      { object: "Deployment/hello", field: "spec.replicas", expected: "3", live: "4", reason: "HorizontalPodAutoscaler/hello" },
    ]);
    // A deploy of the release again changes nothing of the Deployment: the autoscaler keeps its replicas.
    const before = (await getObj(cp, "apps/v1", "Deployment", "hello", "autoscaled"))!.metadata.generation;
    await d.deploy(req("1.0.0", { force_conflicts: "true" }));
    const after = (await getObj(cp, "apps/v1", "Deployment", "hello", "autoscaled"))!;
    assert.deepEqual([after.spec.replicas, after.metadata.generation], [4, before]);
  });
});
