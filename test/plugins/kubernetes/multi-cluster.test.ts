import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ResultError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import {
  getObj,
  helloManifest,
  makeRequest,
  memoryLogger,
  pullableImages,
  rollbackRequest,
  scratch,
  secretsOf,
  stuckManifest,
} from "./helpers.js";

/** Two real control planes, each with its own CA, service-account keys and token. */
describe("kubernetes plugin: several clusters", () => {
  const clusters: KubeControlPlane[] = [];
  const access: ClusterAccess[] = [];
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    for (const cp of await Promise.all([KubeControlPlane.start({ pullableImages }), KubeControlPlane.start({ pullableImages })]))
      clusters.push(cp);
    for (const cp of clusters) access.push(await cp.serviceAccount("hello"));
    files = await scratch();
  });
  after(async () => {
    await Promise.all(clusters.map((c) => c.stop()));
    await files?.cleanup();
  });

  it("dry-runs and deploys to two clusters in parallel, each with its own history", async () => {
    assert.equal(d.parallelTargets(), true);
    const req = makeRequest({
      clusters,
      access,
      artifactPath: await files.write("h.yaml", helloManifest),
      version: "1.0.0",
      params: { "var.REPLICAS": "2" },
      parallelism: 2,
    });
    const dry = await d.dryRun(req);
    assert.deepEqual(
      dry.targets.map((t) => [t.host, t.status, t.details?.cluster_version]),
      [
        ["127.0.0.1", "ready", "v1.34.2"],
        ["127.0.0.1", "ready", "v1.34.2"],
      ],
    );
    const marks = await Promise.all(clusters.map(async (c) => (await c.auditedRequests()).length));
    const res = await d.deploy(req);
    assert.deepEqual(
      res.targets.map((t) => t.status),
      ["deployed", "deployed"],
    );
    // Both clusters were being deployed at once: each saw its first apply before the other's last request.
    const [a, b] = await Promise.all(clusters.map(async (c, i) => (await c.auditedRequests()).slice(marks[i])));
    const firstApply = (rs: typeof a) => rs!.find((r) => r.verb === "patch" && !r.requestURI.includes("dryRun"))!.received;
    const last = (rs: typeof a) => rs!.at(-1)!.completed;
    assert.ok(firstApply(b) < last(a) && firstApply(a) < last(b), "the clusters were deployed at the same time");
    for (const c of clusters) {
      assert.equal((await getObj(c, "apps/v1", "Deployment", "hello"))!.status.availableReplicas, 2);
      assert.ok(await getObj(c, "v1", "ConfigMap", "manent-hello-test"));
    }
    const releases = await d.currentRelease(req);
    assert.deepEqual(
      releases.map((r) => [r.host, r.version]),
      [
        ["127.0.0.1", "1.0.0"],
        ["127.0.0.1", "1.0.0"],
      ],
    );
  });

  it("a stuck rollout fails the deploy; rollback returns every cluster to 1.0.0", async () => {
    const base = { clusters, access, params: { "var.REPLICAS": "2" }, parallelism: 2 };
    const recorded = await d.currentRelease(
      makeRequest({ ...base, version: "1.0.0", artifactPath: await files.write("h.yaml", helloManifest) }),
    );
    const req = makeRequest({ ...base, version: "1.1.0", artifactPath: await files.write("s.yaml", stuckManifest(2)) });
    const err = await d.deploy(req).then(
      () => assert.fail("deployed a missing image"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.ok(err.permanent);
    assert.match(err.message, /rollout stuck/);
    assert.deepEqual(
      err.result.targets.map((t) => t.status),
      ["failed", "failed"],
    );

    const rb = await d.rollback(rollbackRequest(req, recorded));
    assert.deepEqual(
      rb.targets.map((t) => t.status),
      ["rolled_back", "rolled_back"],
    );
    for (const c of clusters) {
      assert.equal((await getObj(c, "apps/v1", "Deployment", "hello"))!.metadata.annotations!["manent.io/version"], "1.0.0");
    }
  });

  it("uses each cluster's own token and CA when its target labels name them; another cluster's token is refused", async () => {
    const base = makeRequest({
      clusters,
      access,
      artifactPath: await files.write("own.yaml", helloManifest),
      version: "1.0.0",
      application: "own",
      params: { "var.REPLICAS": "1" },
      parallelism: 2,
    });
    const secrets = secretsOf({
      "tok-eu1": access[0]!.token,
      "tok-eu2": access[1]!.token,
      "ca-eu1": access[0]!.caPem,
      "ca-eu2": access[1]!.caPem,
    });
    const req = {
      ...base,
      params: { ...base.params, token_secret: "tok-eu1", ca_secret: "ca-eu1" },
      targets: base.targets.map((t, i) => ({
        ...t,
        labels: (i === 1 ? { token_secret: "tok-eu2", ca_secret: "ca-eu2" } : {}) as Record<string, string>,
      })),
      secrets,
    };
    const res = await d.deploy(req);
    assert.deepEqual(
      res.targets.map((t) => t.status),
      ["deployed", "deployed"],
    );
    for (const c of clusters) assert.ok(await getObj(c, "v1", "ConfigMap", "manent-own-test"));
    // Without the labels, the second cluster gets the first one's CA and token: its certificate does not verify.
    const err = await d.deploy({ ...req, targets: base.targets.map((t) => ({ ...t, labels: {} })) }).then(
      () => assert.fail("accepted another cluster's credentials"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError && err.result.targets[1]!.status === "failed");
    assert.ok(err.permanent);
    assert.match(err.message, /cannot verify the API server's certificate/);
    // With the right CA but the first cluster's token: 401, permanent.
    const wrongToken = await d
      .deploy({
        ...req,
        targets: base.targets.map((t, i) => ({ ...t, labels: (i === 1 ? { ca_secret: "ca-eu2" } : {}) as Record<string, string> })),
      })
      .then(
        () => assert.fail("accepted another cluster's token"),
        (e: unknown) => e,
      );
    assert.ok(wrongToken instanceof ResultError && wrongToken.permanent);
    assert.match(wrongToken.message, /refused the token in secret "tok-eu1" \(401 Unauthorized\)/);
  });
});
