import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { ManentError } from "../../../src/plugin.js";
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
  stuckManifest,
  type RequestInput,
} from "./helpers.js";

function configMap(name: string, value: string): string {
  return `---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}}\ndata: {value: "${value}"}\n`;
}

describe("kubernetes plugin: release history, pruning, rollback", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const params = { "var.REPLICAS": "2" };

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.serviceAccount("hello");
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  const cms = async () => (await historyConfigMaps(cp)).map((c) => String(c.metadata.name));
  const on = (application: string, extra: Partial<RequestInput> = {}) => ({
    clusters: [cp],
    access: [access],
    application,
    params,
    ...extra,
  });
  const cm = async (name: string) => getObj(cp, "v1", "ConfigMap", name);

  it("prunes objects a successful release dropped, never after a failed one; rollback removes what the failed one added", async () => {
    const v1 = await files.write("p1.yaml", helloManifest + configMap("extra", "1"));
    await d.deploy(makeRequest({ ...on("prune"), version: "1.0.0", artifactPath: v1 }));
    assert.ok(await cm("extra"));

    // 1.1.0 drops `extra`, adds `added`, and is stuck: nothing is pruned
    const recorded = await d.currentRelease(makeRequest({ ...on("prune"), version: "1.0.0", artifactPath: v1 }));
    const req2 = makeRequest({
      ...on("prune"),
      version: "1.1.0",
      artifactPath: await files.write("p2.yaml", stuckManifest(2) + configMap("added", "2")),
    });
    await assert.rejects(d.deploy(req2), /rollout stuck/);
    assert.ok(await cm("extra"), "not pruned after a failure");
    assert.ok(await cm("added"));
    const rb = await d.rollback(rollbackRequest(req2, recorded));
    assert.equal(rb.targets[0]!.details?.objects_removed, "1");
    assert.equal(await cm("added"), undefined, "the failed release's new object is gone");
    assert.deepEqual((await cm("extra"))!.data, { value: "1" });

    // 1.2.0 drops `extra` and succeeds: pruned
    const res = await d.deploy(
      makeRequest({ ...on("prune"), version: "1.2.0", artifactPath: await files.write("p3.yaml", helloManifest) }),
    );
    assert.equal(res.targets[0]!.details?.objects_pruned, "1");
    assert.equal(await cm("extra"), undefined);
    assert.ok(await getObj(cp, "apps/v1", "Deployment", "hello"));
    assert.ok(await getObj(cp, "v1", "Service", "hello"));
    const index = (await cm("manent-prune-test"))!.data!;
    assert.match(index.current!, /^manent-prune-test-1-2-0-/);
    assert.match(index.previous!, /^manent-prune-test-1-0-0-/);
  });

  it("a failed release that was never rolled back: its history ConfigMap and what it added go with the next successful deploy", async () => {
    await d.deploy(
      makeRequest({ ...on("orphan"), version: "1.0.0", artifactPath: await files.write("o1.yaml", configMap("orphan-a", "1").slice(4)) }),
    );
    // 1.1.0 fails (its image never pulls) and rollback is off: its release ConfigMap stays pending.
    const failed = makeRequest({
      ...on("orphan"),
      version: "1.1.0",
      artifactPath: await files.write(
        "o2.yaml",
        configMap("orphan-a", "2").slice(4) +
          configMap("orphan-added", "x") +
          "---\n" +
          stuckManifest(2)
            .replace(/name: hello/g, "name: orphan-web")
            .replace(/app: hello/g, "app: orphan-web"),
      ),
    });
    await assert.rejects(d.deploy(failed), /rollout stuck/);
    const pendingName = (await cm("manent-orphan-test"))!.data!.pending;
    assert.ok(pendingName, "the failed release is pending in the index");
    assert.ok((await cms()).some((n) => n.startsWith("manent-orphan-test-1-1-0-")));

    await d.deploy(
      makeRequest({ ...on("orphan"), version: "1.2.0", artifactPath: await files.write("o3.yaml", configMap("orphan-a", "3").slice(4)) }),
    );
    const names = (await cms()).filter((n) => n.startsWith("manent-orphan-test"));
    assert.equal(names.filter((n) => n.includes("-1-1-0-")).length, 0, `the failed release's ConfigMap is deleted: ${names.join(", ")}`);
    assert.equal(await cm("orphan-added"), undefined, "what the failed release added is pruned");
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "orphan-web"), undefined);
    assert.deepEqual((await cm("orphan-a"))!.data, { value: "3" });
  });

  it("redeploying the same version changes nothing: no new generation, no new resourceVersion", async () => {
    const path = await files.write("same.yaml", helloManifest.replace(/name: hello/g, "name: same").replace(/app: hello/g, "app: same"));
    await d.deploy(makeRequest({ ...on("same"), version: "1.0.0", artifactPath: path }));
    const first = (await getObj(cp, "apps/v1", "Deployment", "same"))!;
    const firstSvc = (await getObj(cp, "v1", "Service", "same"))!;
    const res = await d.deploy(makeRequest({ ...on("same"), version: "1.0.0", artifactPath: path }));
    assert.equal(res.targets[0]!.status, "deployed");
    const again = (await getObj(cp, "apps/v1", "Deployment", "same"))!;
    assert.equal(again.metadata.generation, first.metadata.generation);
    assert.equal(again.metadata.resourceVersion, first.metadata.resourceVersion, "the server stored nothing new");
    assert.equal((await getObj(cp, "v1", "Service", "same"))!.metadata.resourceVersion, firstSvc.metadata.resourceVersion);
    const releases = JSON.parse((await cm("manent-same-test"))!.data!.releases!) as { configmap: string }[];
    assert.equal(releases.length, 1, "one release in the history, not two");
  });

  it("keeps history_limit releases and deletes older ones", async () => {
    for (const v of ["1", "2", "3"]) {
      const path = await files.write(`l${v}.yaml`, configMap("limit-cm", v).slice(4));
      await d.deploy(makeRequest({ ...on("limit"), params: { ...params, history_limit: "2" }, version: `${v}.0.0`, artifactPath: path }));
    }
    const history = (await cms()).filter((n) => n.startsWith("manent-limit-test-"));
    assert.equal(history.length, 2, history.join(", "));
    assert.ok(history.some((n) => n.startsWith("manent-limit-test-3-0-0-")));
    assert.ok(history.some((n) => n.startsWith("manent-limit-test-2-0-0-")));
    const releases = JSON.parse((await cm("manent-limit-test"))!.data!.releases!) as { version: string }[];
    assert.deepEqual(
      releases.map((r) => r.version),
      ["3.0.0", "2.0.0"],
    );
  });

  it("a release over 256 KiB is gzipped into binaryData", async () => {
    const path = await files.write("mid.yaml", configMap("mid", "x".repeat(400_000)).slice(4));
    const res = await d.deploy(makeRequest({ ...on("mid"), version: "1.0.0", artifactPath: path }));
    const release = (await cm(res.targets[0]!.details!.release!))!;
    assert.equal(release.data!.objects, undefined);
    assert.equal(release.data!.parts, undefined);
    assert.ok(release.binaryData!["objects.json.gz"]!.length < 10_000, "compressible data compresses");
  });

  it("a release over 1 MiB compressed is split over several ConfigMaps the real server accepts, and rolled back intact", async () => {
    // Random data does not compress: three 700 KB ConfigMaps make ~2 MB of history.
    const blobs = [0, 1, 2].map(() => randomBytes(525_000).toString("base64"));
    const big = await files.write(
      "big.yaml",
      blobs
        .map((b, i) => configMap(`blob-${i}`, b))
        .join("")
        .slice(4),
    );
    const res = await d.deploy(makeRequest({ ...on("big"), version: "1.0.0", artifactPath: big }));
    const release = (await cm(res.targets[0]!.details!.release!))!;
    const parts = Number(release.data!.parts);
    assert.ok(parts >= 2, `split into ${parts} parts`);
    for (let i = 1; i <= parts; i++) {
      const part = (await cm(`${release.metadata.name}-part-${i}`))!;
      assert.ok(Buffer.from(part.binaryData!.chunk!, "base64").length <= 1024 * 1024);
    }

    const recorded = await d.currentRelease(makeRequest({ ...on("big"), version: "1.0.0", artifactPath: big }));
    const req2 = makeRequest({
      ...on("big"),
      version: "2.0.0",
      artifactPath: await files.write("small.yaml", configMap("blob-0", "small").slice(4)),
    });
    await d.deploy(req2);
    assert.equal(await cm("blob-1"), undefined, "pruned by 2.0.0");

    const rb = await d.rollback(rollbackRequest(req2, recorded));
    assert.equal(rb.targets[0]!.status, "rolled_back");
    for (const [i, b] of blobs.entries()) assert.equal((await cm(`blob-${i}`))!.data!.value, b);
    assert.equal((await d.currentRelease(req2))[0]!.version, "1.0.0");
  });

  it("rollback to a version missing from the history is a clear error", async () => {
    const req = makeRequest({
      ...on("missing"),
      version: "2.0.0",
      artifactPath: await files.write("x.yaml", configMap("x", "1").slice(4)),
    });
    const err = await d.rollback(rollbackRequest(req, [{ host: "127.0.0.1", version: "0.9.0" }])).then(
      () => assert.fail("rolled back to nothing"),
      (e: unknown) => ManentError.from(e),
    );
    assert.match(err.message, /cannot roll back to 0\.9\.0: no such release in the history ConfigMap hello\/manent-missing-test/);
  });
});
