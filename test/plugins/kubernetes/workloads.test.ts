import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import {
  getObj,
  helloManifest,
  makeRequest as makeRequestOn,
  memoryLogger,
  pullableImages,
  rollbackRequest,
  scratch,
  type RequestInput,
} from "./helpers.js";

const statefulAndDaemon = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:17"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "fluent-bit:3"}]}
`;

async function failure(p: Promise<unknown>): Promise<ManentError> {
  return p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => ManentError.from(e),
  );
}

describe("kubernetes plugin: workloads and edge cases", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const makeRequest = (input: Omit<RequestInput, "clusters" | "access">) => makeRequestOn({ ...input, clusters: [cp], access: [access] });

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.clusterAdminAccount("hello");
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  it("waits for StatefulSets and DaemonSets to roll out", async () => {
    const path = await files.write("sd.yaml", statefulAndDaemon);
    await d.deploy(makeRequest({ application: "sd", version: "1.0.0", artifactPath: path }));
    const sts = (await getObj(cp, "apps/v1", "StatefulSet", "db"))!.status as { readyReplicas: number; observedGeneration: number };
    assert.equal(sts.readyReplicas, 3);
    assert.equal(sts.observedGeneration, 1);
    // One (simulated) node: the real DaemonSet controller wants one pod.
    const ds = (await getObj(cp, "apps/v1", "DaemonSet", "agent"))!.status as { numberAvailable: number; desiredNumberScheduled: number };
    assert.equal(ds.desiredNumberScheduled, 1);
    assert.equal(ds.numberAvailable, 1);
  });

  it("a rollout slower than wait_timeout fails with deadline_exceeded (retryable), naming the object", async () => {
    // progressDeadlineSeconds 600: the real controller does not give up within the wait.
    const path = await files.write(
      "slow.yaml",
      helloManifest
        .replace("http-echo:1.0", "http-echo:does-not-exist")
        .replace("progressDeadlineSeconds: 120", "progressDeadlineSeconds: 600"),
    );
    const err = await failure(
      d.deploy(
        makeRequest({ application: "slow", version: "1.0.0", artifactPath: path, params: { "var.REPLICAS": "2", wait_timeout: "300ms" } }),
      ),
    );
    assert.equal(err.code, Code.DeadlineExceeded);
    assert.equal(err.permanent, false);
    assert.match(err.message, /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: rollout not complete after wait_timeout 300ms: /);
  });

  it("rolling back the first release (to no version) removes everything it applied", async () => {
    const req = makeRequest({
      application: "first",
      version: "1.0.0",
      artifactPath: await files.write("f.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first-a}\ndata: {a: b}\n"),
      params: { "var.REPLICAS": "1" },
    });
    const before = await d.currentRelease(req);
    assert.deepEqual(before, [{ host: "127.0.0.1", version: "" }]);
    await d.deploy(req);
    // The engine rolls back to what currentRelease said before the deploy: nothing.
    const rb = await d.rollback(rollbackRequest(req, before));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    assert.equal(await getObj(cp, "v1", "ConfigMap", "first-a"), undefined);
    assert.deepEqual(await d.currentRelease(req), [{ host: "127.0.0.1", version: "" }]);
  });

  it("a cancelled deploy stops waiting at once with canceled", async () => {
    const path = await files.write(
      "cancel.yaml",
      helloManifest
        .replace("http-echo:1.0", "http-echo:does-not-exist")
        .replace("progressDeadlineSeconds: 120", "progressDeadlineSeconds: 600"),
    );
    const ac = new AbortController();
    const req = makeRequest({
      application: "cancel",
      version: "1.0.0",
      artifactPath: path,
      params: { "var.REPLICAS": "2", wait_timeout: "10m" },
    });
    const logger = memoryLogger();
    // Cancel when the plugin says it is waiting: an event, not a timer.
    const info = logger.info;
    logger.info = (msg, attrs) => {
      info(msg, attrs);
      if (msg.includes("waiting for rollouts")) ac.abort();
    };
    const err = await failure(d.deploy({ ...req, logger, signal: ac.signal }));
    assert.equal(err.code, Code.Canceled);
    assert.ok(logger.lines.some((l) => l.msg.includes("waiting for rollouts")));
  });

  it("a release that creates its own namespace: the server's dry run does not refuse what goes into it", async () => {
    const path = await files.write(
      "ns.yaml",
      "apiVersion: v1\nkind: Namespace\nmetadata: {name: fresh}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: inside}\ndata: {a: b}\n",
    );
    const req = makeRequest({ application: "fresh", version: "1.0.0", artifactPath: path, params: { namespace: "fresh" } });
    assert.equal((await d.dryRun(req)).targets[0]!.status, "ready");
    assert.equal(await getObj(cp, "v1", "Namespace", "fresh", undefined), undefined, "dry-run created nothing");
    assert.equal((await d.deploy(req)).targets[0]!.status, "deployed");
    assert.deepEqual((await getObj(cp, "v1", "ConfigMap", "inside", "fresh"))!.data, { a: "b" });
    // Rolled back to nothing: the namespace it created goes, and the history with it.
    const rb = await d.rollback(rollbackRequest(req, [{ host: "127.0.0.1", version: "" }]));
    assert.deepEqual([rb.targets[0]!.status, rb.targets[0]!.details?.objects_removed], ["rolled_back", "2"]);
    const ns = await getObj(cp, "v1", "Namespace", "fresh", undefined);
    assert.ok(ns === undefined || ns.status.phase === "Terminating", "the namespace is being deleted by the real namespace controller");
  });

  it("the same object twice in an artifact is refused", async () => {
    const path = await files.write(
      "dup.yaml",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\n",
    );
    const err = await failure(d.deploy(makeRequest({ application: "dup", version: "1.0.0", artifactPath: path })));
    assert.equal(err.code, Code.InvalidArgument);
    assert.match(err.message, /ConfigMap\/hello\/twice appears twice in the artifact/);
  });

  it("a kind the cluster does not serve is refused before anything is applied", async () => {
    const path = await files.write("unknown.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n");
    const err = await failure(d.dryRun(makeRequest({ application: "unk", version: "1.0.0", artifactPath: path })));
    assert.match(err.message, /Gadget\/g: the cluster does not serve kind Gadget in example\.com\/v1/);
  });
});
