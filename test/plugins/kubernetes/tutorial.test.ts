import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isPermanent, ResultError } from "../../../src/plugin.js";
import { kubernetesFactory, type KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { TestApiServer, tutorialRole } from "./api-server/index.js";
import { helloManifest, makeRequest, memoryLogger, rollbackRequest, scratch, stuckManifest } from "./helpers.js";

/** The tutorial, chapter 4: dry-run, deploy, a stuck 1.1.0 and its rollback to 1.0.0. */
describe("kubernetes plugin: the tutorial", () => {
  let api: TestApiServer;
  let files: Awaited<ReturnType<typeof scratch>>;
  const plugin = Promise.resolve(kubernetesFactory({}, memoryLogger())) as Promise<KubernetesDeployer>;

  before(async () => {
    api = await TestApiServer.start({
      tokens: { "tok-manent": { user: "system:serviceaccount:hello:manent", rules: tutorialRole("hello") } },
      namespaces: ["hello"],
    });
    files = await scratch();
  });
  after(async () => {
    await api.close();
    await files.cleanup();
  });

  const v1 = () => files.write("hello-1.0.0.yaml", helloManifest);

  it("dry-run applies every object with dryRun=All and stores nothing", async () => {
    const d = await plugin;
    const req = makeRequest({ clusters: [api], artifactPath: await v1(), version: "1.0.0", params: { "var.REPLICAS": "2", wait_timeout: "3m" } });
    const before = api.requests.length;
    const { targets, ...rest } = await d.dryRun(req);
    assert.deepEqual(rest, { plugin: "kubernetes" });
    assert.equal(targets.length, 1);
    const { duration_ms, ...target } = targets[0]!;
    assert.equal(typeof duration_ms, "number");
    assert.deepEqual(target, {
      host: "127.0.0.1",
      status: "ready",
      details: { cluster_version: api.gitVersion, namespace: "hello", objects_checked: "2", objects_skipped: "0" },
    });
    const patches = api.requests.slice(before).filter((r) => r.method === "PATCH");
    assert.ok(patches.length >= 2);
    for (const p of patches) {
      assert.equal(p.query.dryRun, "All");
      assert.equal(p.contentType, "application/apply-patch+yaml");
      assert.equal(p.query.fieldManager, "manent");
    }
    assert.equal(api.get("apps", "deployments", "hello", "hello"), undefined);
    assert.deepEqual(api.list("", "configmaps", "hello"), []);
  });

  it("deploys 1.0.0: rollout complete, labels, history ConfigMaps", async () => {
    const d = await plugin;
    const req = makeRequest({ clusters: [api], artifactPath: await v1(), version: "1.0.0", params: { "var.REPLICAS": "2", wait_timeout: "3m" } });
    const result = await d.deploy(req);
    assert.equal(result.targets[0]!.status, "deployed");

    const dep = api.get("apps", "deployments", "hello", "hello")!;
    const status = dep.status as { availableReplicas: number; updatedReplicas: number };
    assert.equal(status.availableReplicas, 2, "deploy returned only after the rollout completed");
    assert.equal(status.updatedReplicas, 2);
    const spec = dep.spec as { replicas: number; template: { spec: { containers: { args: string[] }[] } } };
    assert.equal(spec.replicas, 2);
    assert.deepEqual(spec.template.spec.containers[0]!.args, ["-listen=:8080", "-text=hello from 1.0.0 in test"]);
    for (const obj of [dep, api.get("", "services", "hello", "hello")!]) {
      assert.deepEqual(obj.metadata.labels, {
        "app.kubernetes.io/managed-by": "manent",
        "manent.io/application": "hello",
        "manent.io/artifact": "hello",
        "manent.io/tenant": "untenanted",
        "manent.io/environment": "test",
      });
      assert.equal((obj.metadata.annotations as Record<string, string>)["manent.io/version"], "1.0.0");
      const managers = (obj.metadata.managedFields as { manager: string; operation: string }[]).map((m) => `${m.manager}/${m.operation}`);
      assert.deepEqual(managers, ["manent/Apply"]);
    }

    const cms = api.list("", "configmaps", "hello");
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
    const base = { clusters: [api], version: "1.0.0", params: { "var.REPLICAS": "2", wait_timeout: "3m" } };
    const recorded = await d.currentRelease(makeRequest({ ...base, artifactPath: await v1() }));
    assert.equal(recorded.length, 1);
    assert.equal(recorded[0]!.host, "127.0.0.1");
    assert.equal(recorded[0]!.version, "1.0.0");

    const req = makeRequest({ ...base, version: "1.1.0", artifactPath: await files.write("hello-1.1.0.yaml", stuckManifest()) });
    const err = await d.deploy(req).then(
      () => assert.fail("deploy of a missing image succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.match(err.message, /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: rollout stuck: ReplicaSet "hello-[b-z2-9]{5,10}" has timed out progressing\.$/);
    assert.ok(isPermanent(err), "a stuck rollout is permanent");
    assert.equal(err.result.targets[0]!.status, "failed");
    const stuck = api.get("apps", "deployments", "hello", "hello")!;
    assert.equal((stuck.metadata.annotations as Record<string, string>)["manent.io/version"], "1.1.0");

    const requestsBefore = api.requests.length;
    // No download: the rollback works with the artifact gone, from the history in the cluster.
    const rb = await d.rollback(rollbackRequest({ ...req, artifact: { ...req.artifact, path: `${files.dir}/gone.yaml` } }, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    const dep = api.get("apps", "deployments", "hello", "hello")!;
    const image = (dep.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!.image;
    assert.equal(`${image} ${(dep.metadata.annotations as Record<string, string>)["manent.io/version"]}`, "hashicorp/http-echo:1.0 1.0.0");
    assert.equal((dep.status as { availableReplicas: number }).availableReplicas, 2);
    const reapplied = api.requests.slice(requestsBefore).filter((r) => r.method === "PATCH" && r.path.endsWith("/deployments/hello"));
    assert.deepEqual(reapplied.map((r) => r.query.force), ["true"], "the saved 1.0.0 Deployment was force-applied once");

    const names = api.list("", "configmaps", "hello").map((c) => String(c.metadata.name));
    assert.equal(names.length, 2, `the failed release's history is gone: ${names.join(", ")}`);
    const index = api.get("", "configmaps", "hello", "manent-hello-test")!.data as Record<string, string>;
    assert.equal(index.current, recorded[0]!.details?.configmap);
    assert.equal(index.pending, undefined);
    const after = await d.currentRelease(makeRequest({ ...base, artifactPath: await v1() }));
    assert.equal(after[0]!.version, "1.0.0");
  });
});
