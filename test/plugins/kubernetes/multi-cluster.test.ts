import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ResultError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { TestApiServer, tutorialRole } from "./api-server/index.js";
import { helloManifest, makeRequest, memoryLogger, rollbackRequest, scratch, stuckManifest } from "./helpers.js";

describe("kubernetes plugin: several clusters", () => {
  const clusters: TestApiServer[] = [];
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    for (const v of ["v1.31.4+eu1", "v1.30.8+eu2"]) {
      clusters.push(
        await TestApiServer.start({
          tokens: { "tok-manent": { user: "system:serviceaccount:hello:manent", rules: tutorialRole("hello") } },
          namespaces: ["hello"],
          gitVersion: v,
        }),
      );
    }
    files = await scratch();
  });
  after(async () => {
    await Promise.all(clusters.map((c) => c.close()));
    await files.cleanup();
  });

  it("dry-runs and deploys to two clusters in parallel, each with its own history", async () => {
    assert.equal(d.parallelTargets(), true);
    const req = makeRequest({ clusters, artifactPath: await files.write("h.yaml", helloManifest), version: "1.0.0", params: { "var.REPLICAS": "2" }, parallelism: 2 });
    const dry = await d.dryRun(req);
    assert.deepEqual(
      dry.targets.map((t) => [t.status, t.details?.cluster_version]),
      [
        ["ready", "v1.31.4+eu1"],
        ["ready", "v1.30.8+eu2"],
      ],
    );
    // Both clusters are being applied to at once: each sees its first PATCH before either finishes.
    const marks = clusters.map((c) => c.requests.length);
    const res = await d.deploy(req);
    assert.deepEqual(res.targets.map((t) => t.status), ["deployed", "deployed"]);
    const [a, b] = clusters.map((c, i) => c.requests.slice(marks[i]));
    const firstPatch = (rs: typeof a) => rs!.find((r) => r.method === "PATCH" && r.query.dryRun === undefined)!.at;
    assert.ok(firstPatch(b) < a!.at(-1)!.at && firstPatch(a) < b!.at(-1)!.at, "the clusters were deployed at the same time");
    for (const c of clusters) {
      assert.equal((c.get("apps", "deployments", "hello", "hello")!.status as { availableReplicas: number }).availableReplicas, 2);
      assert.ok(c.get("", "configmaps", "hello", "manent-hello-test"));
    }
    const releases = await d.currentRelease(req);
    assert.deepEqual(releases.map((r) => [r.host, r.version]), [
      ["127.0.0.1", "1.0.0"],
      ["127.0.0.1", "1.0.0"],
    ]);
  });

  it("a stuck rollout fails the deploy; rollback returns every cluster to 1.0.0", async () => {
    const base = { clusters, params: { "var.REPLICAS": "2" }, parallelism: 2 };
    const recorded = await d.currentRelease(makeRequest({ ...base, version: "1.0.0", artifactPath: await files.write("h.yaml", helloManifest) }));
    const req = makeRequest({ ...base, version: "1.1.0", artifactPath: await files.write("s.yaml", stuckManifest()) });
    const err = await d.deploy(req).then(
      () => assert.fail("deployed a missing image"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.ok(err.permanent);
    assert.match(err.message, /rollout stuck/);
    assert.deepEqual(err.result.targets.map((t) => t.status), ["failed", "failed"]);

    const rb = await d.rollback(rollbackRequest(req, recorded));
    assert.deepEqual(rb.targets.map((t) => t.status), ["rolled_back", "rolled_back"]);
    for (const c of clusters) {
      const dep = c.get("apps", "deployments", "hello", "hello")!;
      assert.equal((dep.metadata.annotations as Record<string, string>)["manent.io/version"], "1.0.0");
    }
  });

  it("uses each cluster's own token and CA when its target labels name them", async () => {
    const own: TestApiServer[] = [];
    try {
      for (const token of ["tok-eu1", "tok-eu2"]) {
        own.push(await TestApiServer.start({ tokens: { [token]: { user: "system:serviceaccount:hello:manent", rules: tutorialRole("hello") } }, namespaces: ["hello"] }));
      }
      const base = makeRequest({ clusters: own, artifactPath: await files.write("own.yaml", helloManifest), version: "1.0.0", params: { "var.REPLICAS": "1" }, parallelism: 2 });
      const secrets: Record<string, string> = { "tok-eu1": "tok-eu1", "tok-eu2": "tok-eu2", "ca-eu1": own[0]!.caPem, "ca-eu2": own[1]!.caPem };
      const req = {
        ...base,
        params: { ...base.params, token_secret: "tok-eu1", ca_secret: "ca-eu1" },
        targets: base.targets.map((t, i) => (i === 1 ? { ...t, labels: { token_secret: "tok-eu2", ca_secret: "ca-eu2" } } : t)),
        secrets: { secret: (name: string) => Promise.resolve(secrets[name]!) },
      };
      const res = await d.deploy(req);
      assert.deepEqual(res.targets.map((t) => t.status), ["deployed", "deployed"]);
      for (const c of own) assert.ok(c.get("apps", "deployments", "hello", "hello"));
      // Without the label, the second cluster gets the first one's credentials, and refuses them.
      await assert.rejects(d.deploy({ ...req, targets: base.targets }), (err: unknown) => err instanceof ResultError && err.result.targets[1]!.status === "failed");
    } finally {
      await Promise.all(own.map((c) => c.close()));
    }
  });
});
