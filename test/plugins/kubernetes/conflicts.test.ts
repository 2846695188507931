import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
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
} from "./helpers.js";

const manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast, owner: manent}\n";

async function failure(p: Promise<unknown>): Promise<ManentError> {
  return p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => ManentError.from(e),
  );
}

/** Field ownership as the real API server keeps it: another manager's fields, and a refused deploy's rollback. */
describe("kubernetes plugin: field-manager conflicts", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.serviceAccount("hello");
    files = await scratch();
    // Someone applied `mode: slow` with their own field manager (not a Helm release).
    await cp.admin.apply(
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings", namespace: "hello" }, data: { mode: "slow" } },
      { manager: "ops-team" },
    );
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  it("a conflict is a permanent error naming the object, the other manager and the field; the rollback leaves their object alone", async () => {
    const req = makeRequest({
      clusters: [cp],
      access: [access],
      application: "conf",
      version: "1.0.0",
      artifactPath: await files.write("c.yaml", manifest),
    });
    const before = await d.currentRelease(req);
    const err = await failure(d.deploy(req));
    assert.equal(err.code, Code.Aborted);
    assert.ok(err.permanent);
    assert.match(
      err.message,
      /^cluster 127\.0\.0\.1: ConfigMap\/hello\/settings: field manager conflict: Apply failed with 1 conflict: conflict with "ops-team"( using v1)?: \.data\.mode/,
    );
    assert.match(err.message, /force_conflicts: "true"/);
    const cm = (await getObj(cp, "v1", "ConfigMap", "settings"))!;
    assert.deepEqual(cm.data, { mode: "slow" });

    // The engine rolls back to what was there before: nothing of manent's. ops-team's ConfigMap stays.
    const rb = await d.rollback(rollbackRequest(req, before));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    const after = (await getObj(cp, "v1", "ConfigMap", "settings"))!;
    assert.deepEqual(after.data, { mode: "slow" });
    assert.equal(after.metadata.resourceVersion, cm.metadata.resourceVersion, "not touched at all");
    assert.deepEqual(await historyConfigMaps(cp), [], "a refused first deploy leaves no history behind");
  });

  it("force_conflicts takes the fields over", async () => {
    const path = await files.write("c.yaml", manifest);
    await d.deploy(
      makeRequest({
        clusters: [cp],
        access: [access],
        application: "conf",
        version: "1.0.0",
        artifactPath: path,
        params: { force_conflicts: "true" },
      }),
    );
    const cm = (await getObj(cp, "v1", "ConfigMap", "settings"))!;
    assert.deepEqual(cm.data, { mode: "fast", owner: "manent" });
    assert.deepEqual(specManagers(cm), ["manent/Apply"], "ops-team lost its only field");
  });

  it("replicas scaled by hand (kubectl scale) then a deploy: refused naming .spec.replicas, and the rollback leaves the cluster as it found it", async () => {
    const params = { "var.REPLICAS": "2" };
    const v1 = makeRequest({
      clusters: [cp],
      access: [access],
      version: "1.0.0",
      artifactPath: await files.write("h1.yaml", helloManifest),
      params,
    });
    await d.deploy(v1);
    const recorded = await d.currentRelease(v1);

    // What `kubectl scale deployment hello --replicas=3` does: an update of the scale subresource.
    await cp.admin.patch(
      "apps/v1",
      "Deployment",
      "hello",
      "hello",
      { spec: { replicas: 3 } },
      { subresource: "scale", manager: "kubectl" },
    );
    await cp.admin.waitFor("3 replicas available", async () =>
      (await getObj(cp, "apps/v1", "Deployment", "hello"))?.status?.availableReplicas === 3 ? true : undefined,
    );
    const scaled = (await getObj(cp, "apps/v1", "Deployment", "hello"))!;
    const service = (await getObj(cp, "v1", "Service", "hello"))!;

    const v2 = makeRequest({
      ...{ clusters: [cp], access: [access], params },
      version: "1.1.0",
      artifactPath: await files.write("h2.yaml", helloManifest.replace("hello from", "hi from")),
    });
    const err = await failure(d.deploy(v2));
    assert.equal(err.code, Code.Aborted);
    assert.match(
      err.message,
      /Deployment\/hello\/hello: field manager conflict: Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps\/v1: \.spec\.replicas/,
    );

    const rb = await d.rollback(rollbackRequest(v2, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    const dep = (await getObj(cp, "apps/v1", "Deployment", "hello"))!;
    assert.equal(dep.spec.replicas, 3, "the hand-set replicas stay");
    assert.equal(dep.metadata.generation, scaled.metadata.generation, "the Deployment's spec was not changed");
    assert.ok(specManagers(dep).includes("kubectl/Update"), `kubectl (scale) still owns replicas: ${specManagers(dep).join(", ")}`);
    assert.deepEqual(dep.spec.template.spec.containers[0].args, ["-listen=:8080", "-text=hello from 1.0.0 in test"]);
    const svc = (await getObj(cp, "v1", "Service", "hello"))!;
    assert.equal(svc.metadata.annotations!["manent.io/version"], "1.0.0");
    assert.equal(svc.metadata.resourceVersion, service.metadata.resourceVersion, "the Service was not touched");
    const names = (await historyConfigMaps(cp)).map((c) => String(c.metadata.name)).filter((n) => n.startsWith("manent-hello-test"));
    assert.equal(names.length, 2, `only the index and 1.0.0 remain: ${names.join(", ")}`);
  });

  it("a rollback restores what the failed release changed of manent's fields and leaves a container image `kubectl set image` owns", async () => {
    const web = (text: string, image: string) => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "${image}", args: ["-text=${text}"]}]
`;
    const broken = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-broken}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {matchLabels: {app: web-broken}}
  template:
    metadata: {labels: {app: web-broken}}
    spec:
      containers: [{name: web, image: "hashicorp/http-echo:does-not-exist"}]
`;
    const v1 = makeRequest({
      clusters: [cp],
      access: [access],
      application: "web",
      version: "1.0.0",
      artifactPath: await files.write("w1.yaml", web("v1", "hashicorp/http-echo:1.0")),
    });
    await d.deploy(v1);
    const recorded = await d.currentRelease(v1);
    // `kubectl set image deployment/web web=nginx:1.27`: a strategic merge patch by another manager.
    await cp.admin.patch(
      "apps/v1",
      "Deployment",
      "hello",
      "web",
      { spec: { template: { spec: { containers: [{ name: "web", image: "nginx:1.27" }] } } } },
      { manager: "kubectl-set", contentType: "application/strategic-merge-patch+json" },
    );

    // 1.1.0 agrees on the image (shared, no conflict), changes the args, and fails on another Deployment.
    const v2 = makeRequest({
      clusters: [cp],
      access: [access],
      application: "web",
      version: "1.1.0",
      artifactPath: await files.write("w2.yaml", web("v2", "nginx:1.27") + broken),
    });
    await assert.rejects(d.deploy(v2), /Deployment\/hello\/web-broken: rollout stuck/);
    assert.deepEqual((await getObj(cp, "apps/v1", "Deployment", "web"))!.spec.template.spec.containers[0].args, ["-text=v2"]);

    const rb = await d.rollback(rollbackRequest(v2, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    const dep = (await getObj(cp, "apps/v1", "Deployment", "web"))!;
    const container = dep.spec.template.spec.containers[0];
    assert.deepEqual(container.args, ["-text=v1"], "manent's field is back to 1.0.0");
    assert.equal(container.image, "nginx:1.27", "the image kubectl-set owns stays");
    assert.equal(dep.status.availableReplicas, 1);
    assert.ok(specManagers(dep).includes("kubectl-set/Update"));
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "web-broken"), undefined, "what the failed release added is gone");
  });
});
