import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError, ResultError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { TestApiServer, type RbacRule } from "./api-server/index.js";
import { helloManifest, makeRequest, memoryLogger, scratch } from "./helpers.js";

/** A Role like the tutorial's but without services, and configmaps read-only. */
const narrow: RbacRule[] = [
  { apiGroups: ["apps"], resources: ["deployments"], verbs: ["get", "list", "patch", "create", "delete"], namespaces: ["hello"] },
  { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"], namespaces: ["hello"] },
];

describe("kubernetes plugin: RBAC", () => {
  let api: TestApiServer;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    api = await TestApiServer.start({
      tokens: { "tok-narrow": { user: "system:serviceaccount:hello:manent", rules: narrow } },
      namespaces: ["hello"],
    });
    files = await scratch();
  });
  after(async () => {
    await api.close();
    await files.cleanup();
  });

  it("dry-run reports every missing permission, naming the object, verb and resource", async () => {
    const path = await files.write("hello.yaml", helloManifest);
    const req = makeRequest({ clusters: [api], artifactPath: path, version: "1.0.0", token: "tok-narrow", params: { "var.REPLICAS": "2" } });
    const err = await d.dryRun(req).then(
      () => assert.fail("dry-run passed without permissions"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.equal(err.code, Code.PermissionDenied);
    assert.ok(err.permanent);
    assert.match(err.message, /cluster 127\.0\.0\.1: Service\/hello\/hello: forbidden: the token lacks permission "patch" on "services" in namespace "hello"/);
    assert.match(err.message, /User "system:serviceaccount:hello:manent" cannot patch resource "services" in API group "" in the namespace "hello"/);
    // the history ConfigMap needs patch too: reported in the same dry-run
    assert.match(err.message, /release history: cluster 127\.0\.0\.1: ConfigMap\/hello\/manent-hello-test: forbidden: the token lacks permission "patch" on "configmaps"/);
    assert.doesNotMatch(err.message, /Deployment\/hello\/hello/);
    assert.equal(err.result.targets[0]!.status, "failed");
    assert.equal(api.get("apps", "deployments", "hello", "hello"), undefined, "dry-run stored nothing");
  });

  it("a forbidden deploy fails permanently before any workload changes", async () => {
    const path = await files.write("hello.yaml", helloManifest);
    const err = await d
      .deploy(makeRequest({ clusters: [api], artifactPath: path, version: "1.0.0", token: "tok-narrow", params: { "var.REPLICAS": "2" } }))
      .then(
        () => assert.fail("deploy passed without permissions"),
        (e: unknown) => ManentError.from(e),
      );
    assert.ok(err.permanent);
    assert.match(err.message, /ConfigMap\/hello\/manent-hello-test-1-0-0-[0-9a-f]{8}: forbidden/);
    assert.equal(api.get("apps", "deployments", "hello", "hello"), undefined);
  });

  it("an unknown token is unauthenticated", async () => {
    const path = await files.write("hello.yaml", helloManifest);
    const err = await d
      .dryRun(makeRequest({ clusters: [api], artifactPath: path, version: "1.0.0", token: "nope", params: { "var.REPLICAS": "2" } }))
      .then(
        () => assert.fail("accepted"),
        (e: unknown) => ManentError.from(e),
      );
    assert.equal(err.code, Code.Unauthenticated);
    assert.doesNotMatch(err.message, /nope/, "the token never appears in errors");
  });
});
