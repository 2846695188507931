import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError, ResultError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import { getObj, helloManifest, makeRequest, memoryLogger, pullableImages, scratch } from "./helpers.js";

/** A Role like the tutorial's but without services, and configmaps read-only. */
const narrow = [
  { apiGroups: ["apps"], resources: ["deployments"], verbs: ["get", "list", "patch", "create", "delete"] },
  { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] },
];

/** RBAC as the real API server evaluates it, for a service account's token. */
describe("kubernetes plugin: RBAC", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.serviceAccount("hello", "manent", narrow);
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  const request = async () =>
    makeRequest({
      clusters: [cp],
      access: [access],
      artifactPath: await files.write("hello.yaml", helloManifest),
      version: "1.0.0",
      params: { "var.REPLICAS": "2" },
    });

  it("dry-run names every missing permission (a Role without services), with the object, verb and resource", async () => {
    const err = await d.dryRun(await request()).then(
      () => assert.fail("dry-run passed without permissions"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.equal(err.code, Code.PermissionDenied);
    assert.ok(err.permanent);
    assert.match(
      err.message,
      /cluster 127\.0\.0\.1: Service\/hello\/hello: forbidden: the token lacks permission "patch" on "services" in namespace "hello"/,
    );
    assert.match(
      err.message,
      /User "system:serviceaccount:hello:manent" cannot patch resource "services" in API group "" in the namespace "hello"/,
    );
    // the history ConfigMap needs patch too: reported in the same dry-run
    assert.match(
      err.message,
      /release history: cluster 127\.0\.0\.1: ConfigMap\/hello\/manent-hello-test: forbidden: the token lacks permission "patch" on "configmaps"/,
    );
    assert.doesNotMatch(err.message, /Deployment\/hello\/hello/);
    assert.equal(err.result.targets[0]!.status, "failed");
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "hello"), undefined, "dry-run stored nothing");
  });

  it("a forbidden deploy fails permanently before anything changes, naming what is missing", async () => {
    const err = await d.deploy(await request()).then(
      () => assert.fail("deploy passed without permissions"),
      (e: unknown) => ManentError.from(e),
    );
    assert.equal(err.code, Code.PermissionDenied);
    assert.ok(err.permanent);
    assert.match(err.message, /Service\/hello\/hello: forbidden: the token lacks permission "patch" on "services"/);
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "hello"), undefined, "the Deployment it may write was not written either");
  });
});
