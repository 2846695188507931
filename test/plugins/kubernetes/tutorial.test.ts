import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isPermanent, ResultError } from "../../../src/plugin.js";
import { kubernetesFactory, type KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import {
  getObj,
  helloManifest,
  historyConfigMaps,
  makeRequest,
  memoryLogger,
  pullableImages,
  rollbackRequest,
  scratch,
  specManagers,
  stuckManifest,
} from "./helpers.js";

/** The tutorial, chapter 4, on a real control plane: dry-run, deploy, a stuck 1.1.0 and its rollback to 1.0.0. */
describe("kubernetes plugin: the tutorial", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const plugin = Promise.resolve(kubernetesFactory({}, memoryLogger())) as Promise<KubernetesDeployer>;

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    // The tutorial's section 1: namespace, service account, Role, RoleBinding, token Secret.
    access = await cp.serviceAccount("hello");
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  const v1 = () => files.write("hello-1.0.0.yaml", helloManifest);
  const base = () => ({ clusters: [cp], access: [access], params: { "var.REPLICAS": "2", wait_timeout: "3m" } });

  it("dry-run applies every object with dryRun=All and stores nothing", async () => {
    const d = await plugin;
    const req = makeRequest({ ...base(), artifactPath: await v1(), version: "1.0.0" });
    const before = (await cp.auditedRequests()).length;
    const { targets, ...rest } = await d.dryRun(req);
    assert.deepEqual(rest, { plugin: "kubernetes" });
    assert.equal(targets.length, 1);
    const { duration_ms, ...target } = targets[0]!;
    assert.equal(typeof duration_ms, "number");
    assert.deepEqual(target, {
      host: "127.0.0.1",
      status: "ready",
      details: { cluster_version: "v1.34.2", namespace: "hello", objects_checked: "2", objects_skipped: "0" },
    });
    const patches = (await cp.auditedRequests()).slice(before).filter((r) => r.verb === "patch");
    assert.ok(patches.length >= 3, "the Deployment, the Service and the history index");
    for (const p of patches) {
      assert.equal(p.user, access.user);
      const query = new URL(p.requestURI, cp.url).searchParams;
      assert.equal(query.get("dryRun"), "All");
      assert.equal(query.get("fieldManager"), "manent");
    }
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "hello"), undefined);
    assert.deepEqual(await historyConfigMaps(cp), []);
  });

  it("deploys 1.0.0: rollout complete, labels, history ConfigMaps", async () => {
    const d = await plugin;
    const result = await d.deploy(makeRequest({ ...base(), artifactPath: await v1(), version: "1.0.0" }));
    assert.equal(result.targets[0]!.status, "deployed");

    const dep = (await getObj(cp, "apps/v1", "Deployment", "hello"))!;
    assert.equal(dep.status.availableReplicas, 2, "deploy returned only after the rollout completed");
    assert.equal(dep.status.updatedReplicas, 2);
    assert.equal(dep.spec.replicas, 2);
    assert.deepEqual(dep.spec.template.spec.containers[0].args, ["-listen=:8080", "-text=hello from 1.0.0 in test"]);
    for (const obj of [dep, (await getObj(cp, "v1", "Service", "hello"))!]) {
      assert.deepEqual(obj.metadata.labels, {
        "app.kubernetes.io/managed-by": "manent",
        "manent.io/application": "hello",
        "manent.io/artifact": "hello",
        "manent.io/tenant": "untenanted",
        "manent.io/environment": "test",
      });
      assert.equal(obj.metadata.annotations!["manent.io/version"], "1.0.0");
      assert.deepEqual(specManagers(obj), ["manent/Apply"]);
    }

    const cms = await historyConfigMaps(cp);
    const names = cms.map((c) => String(c.metadata.name));
    assert.equal(names.length, 2);
    assert.equal(names[0], "manent-hello-test");
    assert.match(names[1]!, /^manent-hello-test-1-0-0-[0-9a-f]{8}$/);
    const index = cms[0]!.data as Record<string, string>;
    assert.deepEqual(Object.keys(index).sort(), ["current", "previous", "releases"]);
    assert.equal(index.current, names[1]);
    const release = cms[1]!;
    assert.equal(Object.keys({ ...(release.data as object), ...(release.binaryData as object) }).length, 5);
    assert.equal(result.targets[0]!.details?.release, names[1]);
  });

  it("a stuck 1.1.0 fails permanently with the rollout message, and rollback returns to 1.0.0", async () => {
    const d = await plugin;
    const recorded = await d.currentRelease(makeRequest({ ...base(), version: "1.0.0", artifactPath: await v1() }));
    assert.equal(recorded.length, 1);
    assert.equal(recorded[0]!.host, "127.0.0.1");
    assert.equal(recorded[0]!.version, "1.0.0");

    const req = makeRequest({ ...base(), version: "1.1.0", artifactPath: await files.write("hello-1.1.0.yaml", stuckManifest(3)) });
    const err = await d.deploy(req).then(
      () => assert.fail("deploy of a missing image succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.match(
      err.message,
      /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: rollout stuck: ReplicaSet "hello-[b-df-hj-np-tv-z2-9]{6,10}" has timed out progressing\.$/,
    );
    assert.ok(isPermanent(err), "a stuck rollout is permanent");
    assert.equal(err.result.targets[0]!.status, "failed");
    const stuck = (await getObj(cp, "apps/v1", "Deployment", "hello"))!;
    assert.equal(stuck.metadata.annotations!["manent.io/version"], "1.1.0");
    assert.equal(stuck.status.availableReplicas, 2, "the old ReplicaSet keeps serving");

    const before = (await cp.auditedRequests()).length;
    // No download: the rollback works with the artifact gone, from the history in the cluster.
    const rb = await d.rollback(rollbackRequest({ ...req, artifact: { ...req.artifact, path: `${files.dir}/gone.yaml` } }, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    const dep = (await getObj(cp, "apps/v1", "Deployment", "hello"))!;
    assert.equal(
      `${dep.spec.template.spec.containers[0].image} ${dep.metadata.annotations!["manent.io/version"]}`,
      "hashicorp/http-echo:1.0 1.0.0",
    );
    assert.equal(dep.status.availableReplicas, 2);
    assert.equal(dep.status.updatedReplicas, 2);
    const reapplied = (await cp.auditedRequests())
      .slice(before)
      .filter((r) => r.verb === "patch" && new URL(r.requestURI, cp.url).pathname.endsWith("/deployments/hello"));
    assert.deepEqual(
      reapplied.map((r) => new URL(r.requestURI, cp.url).searchParams.get("force")),
      [null],
      "the saved 1.0.0 Deployment was applied once, without force",
    );

    const names = (await historyConfigMaps(cp)).map((c) => String(c.metadata.name));
    assert.equal(names.length, 2, `the failed release's history is gone: ${names.join(", ")}`);
    const index = (await getObj(cp, "v1", "ConfigMap", "manent-hello-test"))!.data!;
    assert.equal(index.current, recorded[0]!.details?.configmap);
    assert.equal(index.pending, undefined);
    const after = await d.currentRelease(makeRequest({ ...base(), version: "1.0.0", artifactPath: await v1() }));
    assert.equal(after[0]!.version, "1.0.0");
    assert.deepEqual(cp.kubelet.errors, []);
  });
});
