import assert from "node:assert/strict";
import https from "node:https";
import { after, before, describe, it } from "node:test";
import { TestApiServer, tutorialRole } from "./api-server/index.js";

/** The test API server's own behaviour on the points the plugin relies on. */
describe("test Kubernetes API server", () => {
  let api: TestApiServer;

  before(async () => {
    api = await TestApiServer.start({
      tokens: {
        sa: { user: "system:serviceaccount:hello:manent", rules: tutorialRole("hello") },
        "patch-only": { user: "patcher", rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "patch"], namespaces: ["hello"] }] },
      },
      namespaces: ["hello"],
    });
  });
  after(() => api.close());

  function call(method: string, path: string, opts: { token?: string; body?: unknown; type?: string } = {}): Promise<{ status: number; body: Record<string, unknown> }> {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        { host: api.host, port: api.port, path, method, ca: api.caPem, headers: { ...(opts.token === undefined ? {} : { Authorization: `Bearer ${opts.token}` }), ...(payload ? { "Content-Type": opts.type ?? "application/apply-patch+yaml" } : {}) } },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }));
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  }

  const cm = (name: string, data: Record<string, string>) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data });

  it("serves TLS with its CA and refuses unknown tokens with a 401 Status", async () => {
    const res = await call("GET", "/api/v1/namespaces/hello/configmaps", { token: "wrong" });
    assert.equal(res.status, 401);
    assert.deepEqual(res.body, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "Unauthorized", reason: "Unauthorized", code: 401 });
  });

  it("discovery lists resources and subresources", async () => {
    const res = await call("GET", "/apis/apps/v1", { token: "sa" });
    assert.equal(res.body.kind, "APIResourceList");
    const names = (res.body.resources as { name: string }[]).map((r) => r.name);
    assert.ok(names.includes("deployments") && names.includes("deployments/status"));
    assert.equal((await call("GET", "/apis/nope.example.com/v1", { token: "sa" })).status, 404);
  });

  it("apply: create needs create, dryRun stores nothing, resourceVersion and managedFields", async () => {
    const path = "/api/v1/namespaces/hello/configmaps/a?fieldManager=m";
    const dry = await call("PATCH", `${path}&dryRun=All`, { token: "sa", body: cm("a", { k: "v" }) });
    assert.equal(dry.status, 201);
    assert.equal(api.get("", "configmaps", "hello", "a"), undefined);
    const created = await call("PATCH", path, { token: "sa", body: cm("a", { k: "v" }) });
    assert.equal(created.status, 201);
    const meta = created.body.metadata as { resourceVersion: string; uid: string; managedFields: { manager: string; operation: string; fieldsV1: unknown }[] };
    assert.match(meta.resourceVersion, /^\d+$/);
    assert.deepEqual(meta.managedFields.map((m) => [m.manager, m.operation, m.fieldsV1]), [["m", "Apply", { "f:data": { "f:k": {} } }]]);
    const noCreate = await call("PATCH", "/api/v1/namespaces/hello/configmaps/b?fieldManager=m", { token: "patch-only", body: cm("b", { k: "v" }) });
    assert.equal(noCreate.status, 403);
    assert.match(String(noCreate.body.message), /cannot create resource "configmaps"/);
    assert.equal((await call("PATCH", path, { token: "patch-only", body: cm("a", { k: "w" }) })).status, 200, "patch alone updates");
    const missingManager = await call("PATCH", "/api/v1/namespaces/hello/configmaps/a", { token: "sa", body: cm("a", { k: "v" }) });
    assert.equal(missingManager.status, 422);
  });

  it("403 names the verb, resource, group and namespace", async () => {
    const res = await call("PATCH", "/apis/apps/v1/namespaces/hello/statefulsets/db?fieldManager=m", {
      token: "sa",
      body: { apiVersion: "apps/v1", kind: "StatefulSet", metadata: { name: "db" }, spec: {} },
    });
    assert.equal(res.status, 403);
    assert.equal(res.body.reason, "Forbidden");
    assert.equal(res.body.message, 'statefulsets.apps "db" is forbidden: User "system:serviceaccount:hello:manent" cannot patch resource "statefulsets" in API group "apps" in the namespace "hello"');
    assert.deepEqual(res.body.details, { name: "db", group: "apps", kind: "statefulsets" });
  });

  it("conflicts between field managers; equal values are shared; force takes over", async () => {
    const path = (m: string, force = false) => `/api/v1/namespaces/hello/configmaps/shared?fieldManager=${m}${force ? "&force=true" : ""}`;
    assert.equal((await call("PATCH", path("one"), { token: "sa", body: cm("shared", { a: "1" }) })).status, 201);
    assert.equal((await call("PATCH", path("two"), { token: "sa", body: cm("shared", { a: "1", b: "2" }) })).status, 200, "same value: no conflict");
    const conflict = await call("PATCH", path("two"), { token: "sa", body: cm("shared", { a: "9" }) });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.message, 'Apply failed with 1 conflict: conflict with "one" using v1: .data.a');
    const forced = await call("PATCH", path("two", true), { token: "sa", body: cm("shared", { a: "9" }) });
    assert.equal(forced.status, 200);
    assert.deepEqual(forced.body.data, { a: "9" }, "b is dropped: two stopped applying it and nobody else owns it");
    assert.deepEqual((forced.body.metadata as { managedFields: { manager: string }[] }).managedFields.map((m) => m.manager), ["two"]);
  });

  it("a ConfigMap over 1 MiB is invalid; a missing object is a NotFound Status", async () => {
    const big = await call("PATCH", "/api/v1/namespaces/hello/configmaps/big?fieldManager=m", { token: "sa", body: cm("big", { k: "x".repeat(1024 * 1024) }) });
    assert.equal(big.status, 422);
    assert.match(String(big.body.message), /Too long: must have at most 1048576 bytes/);
    const missing = await call("GET", "/api/v1/namespaces/hello/configmaps/nope", { token: "sa" });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.message, 'configmaps "nope" not found');
  });

  it("a Deployment goes progressing → available, with generation and observedGeneration", async () => {
    const dep = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: { replicas: 3, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image: "nginx:1.27" }] } } },
    };
    const res = await call("PATCH", "/apis/apps/v1/namespaces/hello/deployments/web?fieldManager=m", { token: "sa", body: dep });
    assert.equal((res.body.metadata as { generation: number }).generation, 1);
    // Polls the way a client does: the controller moves on its own clock.
    const seen = new Set<string>();
    for (;;) {
      const live = (await call("GET", "/apis/apps/v1/namespaces/hello/deployments/web", { token: "sa" })).body;
      const status = (live.status ?? {}) as { observedGeneration?: number; availableReplicas?: number; conditions?: { type: string; reason: string }[] };
      for (const c of status.conditions ?? []) seen.add(`${c.type}/${c.reason}`);
      if (status.availableReplicas === 3) {
        assert.equal(status.observedGeneration, 1);
        break;
      }
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(seen.has("Progressing/NewReplicaSetAvailable"));
    assert.ok(seen.has("Available/MinimumReplicasAvailable"));
  });
});
