import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { clusterAdmin, TestApiServer } from "./api-server/index.js";
import { makeRequest, memoryLogger, scratch } from "./helpers.js";

const manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast, owner: manent}\n";

describe("kubernetes plugin: field-manager conflicts", () => {
  let api: TestApiServer;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());

  before(async () => {
    api = await TestApiServer.start({ tokens: { "tok-manent": { user: "admin", rules: clusterAdmin } }, namespaces: ["hello"] });
    files = await scratch();
    // Someone applied `mode: slow` with their own field manager (not a Helm release).
    api.store.apply(api.resource("", "v1", "configmaps")!, "hello", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" }, data: { mode: "slow" } }, "ops-team", false, false);
  });
  after(async () => {
    await api.close();
    await files.cleanup();
  });

  it("a conflict is a permanent error naming the object, the other manager and the field", async () => {
    const path = await files.write("c.yaml", manifest);
    const err = await d.deploy(makeRequest({ clusters: [api], application: "conf", version: "1.0.0", artifactPath: path })).then(
      () => assert.fail("took over another manager's field without force"),
      (e: unknown) => ManentError.from(e),
    );
    assert.equal(err.code, Code.Aborted);
    assert.ok(err.permanent);
    assert.match(err.message, /^cluster 127\.0\.0\.1: ConfigMap\/hello\/settings: field manager conflict: Apply failed with 1 conflict: conflict with "ops-team" using v1: \.data\.mode/);
    assert.match(err.message, /force_conflicts: "true"/);
    assert.deepEqual(api.get("", "configmaps", "hello", "settings")!.data, { mode: "slow" });
  });

  it("force_conflicts takes the fields over", async () => {
    const path = await files.write("c.yaml", manifest);
    await d.deploy(makeRequest({ clusters: [api], application: "conf", version: "1.0.0", artifactPath: path, params: { force_conflicts: "true" } }));
    const cm = api.get("", "configmaps", "hello", "settings")!;
    assert.deepEqual(cm.data, { mode: "fast", owner: "manent" });
    const owners = (cm.metadata.managedFields as { manager: string }[]).map((m) => m.manager);
    assert.deepEqual(owners, ["manent"], "ops-team lost its only field");
  });
});
