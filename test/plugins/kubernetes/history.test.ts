import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { clusterAdmin, TestApiServer } from "./api-server/index.js";
import { helloManifest, makeRequest, memoryLogger, rollbackRequest, scratch, stuckManifest } from "./helpers.js";

function configMap(name: string, value: string): string {
  return `---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}}\ndata: {value: "${value}"}\n`;
}

describe("kubernetes plugin: release history, pruning, rollback", () => {
  let api: TestApiServer;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const params = { "var.REPLICAS": "2" };

  before(async () => {
    api = await TestApiServer.start({ tokens: { "tok-manent": { user: "admin", rules: clusterAdmin } }, namespaces: ["hello"] });
    files = await scratch();
  });
  after(async () => {
    await api.close();
    await files.cleanup();
  });

  const cms = () => api.list("", "configmaps", "hello").map((c) => String(c.metadata.name));

  it("prunes objects a successful release dropped, never after a failed one; rollback removes what the failed one added", async () => {
    const base = { clusters: [api], application: "prune", params };
    const v1 = await files.write("p1.yaml", helloManifest + configMap("extra", "1"));
    await d.deploy(makeRequest({ ...base, version: "1.0.0", artifactPath: v1 }));
    assert.ok(api.get("", "configmaps", "hello", "extra"));

    // 1.1.0 drops `extra`, adds `added`, and is stuck: nothing is pruned
    const recorded = await d.currentRelease(makeRequest({ ...base, version: "1.0.0", artifactPath: v1 }));
    const v2 = await files.write("p2.yaml", stuckManifest() + configMap("added", "2"));
    const req2 = makeRequest({ ...base, version: "1.1.0", artifactPath: v2 });
    await assert.rejects(d.deploy(req2), /rollout stuck/);
    assert.ok(api.get("", "configmaps", "hello", "extra"), "not pruned after a failure");
    assert.ok(api.get("", "configmaps", "hello", "added"));
    const rb = await d.rollback(rollbackRequest(req2, recorded));
    assert.equal(rb.targets[0]!.details?.objects_removed, "1");
    assert.equal(api.get("", "configmaps", "hello", "added"), undefined, "the failed release's new object is gone");
    assert.deepEqual(api.get("", "configmaps", "hello", "extra")!.data, { value: "1" });

    // 1.2.0 drops `extra` and succeeds: pruned
    const v3 = await files.write("p3.yaml", helloManifest);
    const res = await d.deploy(makeRequest({ ...base, version: "1.2.0", artifactPath: v3 }));
    assert.equal(res.targets[0]!.details?.objects_pruned, "1");
    assert.equal(api.get("", "configmaps", "hello", "extra"), undefined);
    assert.ok(api.get("apps", "deployments", "hello", "hello"));
    assert.ok(api.get("", "services", "hello", "hello"));
    const index = api.get("", "configmaps", "hello", "manent-prune-test")!.data as Record<string, string>;
    assert.match(index.current!, /^manent-prune-test-1-2-0-/);
    assert.match(index.previous!, /^manent-prune-test-1-0-0-/);
  });

  it("keeps history_limit releases and deletes older ones", async () => {
    const base = { clusters: [api], application: "limit", params: { ...params, history_limit: "2" } };
    for (const v of ["1", "2", "3"]) {
      const path = await files.write(`l${v}.yaml`, configMap("limit-cm", v).slice(4));
      await d.deploy(makeRequest({ ...base, version: `${v}.0.0`, artifactPath: path }));
    }
    const history = cms().filter((n) => n.startsWith("manent-limit-test-"));
    assert.equal(history.length, 2, history.join(", "));
    assert.ok(history.some((n) => n.startsWith("manent-limit-test-3-0-0-")));
    assert.ok(history.some((n) => n.startsWith("manent-limit-test-2-0-0-")));
    const releases = JSON.parse((api.get("", "configmaps", "hello", "manent-limit-test")!.data as Record<string, string>).releases!) as { version: string }[];
    assert.deepEqual(releases.map((r) => r.version), ["3.0.0", "2.0.0"]);
  });

  it("a release over 256 KiB is gzipped into binaryData", async () => {
    const path = await files.write("mid.yaml", configMap("mid", "x".repeat(400_000)).slice(4));
    const res = await d.deploy(makeRequest({ clusters: [api], application: "mid", version: "1.0.0", artifactPath: path }));
    const release = api.get("", "configmaps", "hello", res.targets[0]!.details!.release!)!;
    assert.equal((release.data as Record<string, string>).objects, undefined);
    assert.equal((release.data as Record<string, string>).parts, undefined);
    const gz = (release.binaryData as Record<string, string>)["objects.json.gz"]!;
    assert.ok(gz.length < 10_000, "compressible data compresses");
  });

  it("a release over 1 MiB compressed is split over several ConfigMaps and rolled back intact", async () => {
    const base = { clusters: [api], application: "big", params };
    // Random data does not compress: three 700 KB ConfigMaps make ~2 MB of history.
    const blobs = [0, 1, 2].map(() => randomBytes(525_000).toString("base64"));
    const big = await files.write("big.yaml", blobs.map((b, i) => configMap(`blob-${i}`, b)).join("").slice(4));
    const res = await d.deploy(makeRequest({ ...base, version: "1.0.0", artifactPath: big }));
    const release = api.get("", "configmaps", "hello", res.targets[0]!.details!.release!)!;
    const parts = Number((release.data as Record<string, string>).parts);
    assert.ok(parts >= 2, `split into ${parts} parts`);
    for (let i = 1; i <= parts; i++) {
      const part = api.get("", "configmaps", "hello", `${release.metadata.name as string}-part-${i}`)!;
      assert.ok(Buffer.from((part.binaryData as { chunk: string }).chunk, "base64").length <= 1024 * 1024);
    }

    const recorded = await d.currentRelease(makeRequest({ ...base, version: "1.0.0", artifactPath: big }));
    const small = await files.write("small.yaml", configMap("blob-0", "small").slice(4));
    const req2 = makeRequest({ ...base, version: "2.0.0", artifactPath: small });
    await d.deploy(req2);
    assert.equal(api.get("", "configmaps", "hello", "blob-1"), undefined, "pruned by 2.0.0");

    const rb = await d.rollback(rollbackRequest(req2, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    for (const [i, b] of blobs.entries()) assert.equal((api.get("", "configmaps", "hello", `blob-${i}`)!.data as { value: string }).value, b);
    const after = await d.currentRelease(req2);
    assert.equal(after[0]!.version, "1.0.0");
  });

  it("rollback to a version missing from the history is a clear error", async () => {
    const path = await files.write("x.yaml", configMap("x", "1").slice(4));
    const req = makeRequest({ clusters: [api], application: "missing", version: "2.0.0", artifactPath: path });
    const err = await d.rollback(rollbackRequest(req, [{ host: "127.0.0.1", version: "0.9.0" }])).then(
      () => assert.fail("rolled back to nothing"),
      (e: unknown) => ManentError.from(e),
    );
    assert.match(err.message, /cannot roll back to 0\.9\.0: no such release in the history ConfigMap hello\/manent-missing-test/);
  });
});
