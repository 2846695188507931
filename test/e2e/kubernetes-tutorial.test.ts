import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { helloManifest, pullableImages, stuckManifest } from "../plugins/kubernetes/helpers.js";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import { toolsBin } from "../support/kube/processes.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, type Workspace } from "../support/workspace.js";

/** The tutorial's section 1, rbac.yaml, as the reader applies it with kubectl. */
const rbacYaml = `apiVersion: v1
kind: Namespace
metadata:
  name: hello
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: manent
  namespace: hello
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: manent-deployer
  namespace: hello
rules:
  - apiGroups: [""]
    resources: [configmaps, services]          # configmaps: anche lo storico delle release
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [apps]
    resources: [deployments, replicasets]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: manent-deployer
  namespace: hello
subjects:
  - {kind: ServiceAccount, name: manent, namespace: hello}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: manent-deployer
---
apiVersion: v1
kind: Secret
metadata:
  name: manent-token
  namespace: hello
  annotations:
    kubernetes.io/service-account.name: manent
type: kubernetes.io/service-account-token
`;

/**
 * The Kubernetes tutorial (tutorial-kubernetes.it.md), step by step, through the real manent CLI and
 * manent-server against a real kube-apiserver + etcd + kube-controller-manager (the kubelet
 * simulated): rbac.yaml and the token Secret, dry-run output, deploy, the stuck 1.1.0 rolled back.
 * The one deliberate difference: manent.yml names a Postgres, where the tutorial wrote sqlite.
 */
describe("tutorial: deploy to Kubernetes", () => {
  let cp: KubeControlPlane;
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url });

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    // Section 1: kubectl apply -f rbac.yaml, then the token and ca.crt from the Secret the token controller filled.
    await cp.admin.applyYaml(rbacYaml, { manager: "kubectl" });
    const secret = await cp.admin.waitFor("the token Secret filled", async () => {
      const data = (await cp.get("v1", "Secret", "hello", "manent-token"))?.data as Record<string, string> | undefined;
      return data?.token && data["ca.crt"] ? data : undefined;
    });
    await cp.admin.waitFor("the namespace's default service account", () => cp.get("v1", "ServiceAccount", "hello", "default"));
    await ws.write("k8s/token", Buffer.from(secret.token!, "base64").toString("utf8"));
    await ws.write("k8s/ca.crt", Buffer.from(secret["ca.crt"]!, "base64").toString("utf8"));
    await ws.write("k8s/dist/hello-1.0.0.yaml", helloManifest);
    await ws.write("envconfig/untenanted/hello/hello/test.yml", {
      plugin: "kubernetes",
      targets: [{ host: cp.host, port: cp.port }],
      params: { namespace: "hello", token_secret: "kube-token", ca_secret: "kube-ca", "var.REPLICAS": "2", wait_timeout: "3m" },
      secrets: [
        { name: "kube-token", ref: `file:${ws.path("k8s/token")}` },
        { name: "kube-ca", ref: `file:${ws.path("k8s/ca.crt")}` },
      ],
      rollback: { enabled: true },
    });
    const config = await ws.write("manent.yml", {
      dbos: { database_url: await pg.createDatabase() },
      workdir: "./work",
      plugins: { kubernetes: {} },
      envconfig: {
        required: true,
        providers: [{ name: "default", type: "file", file: { path: "./envconfig/{tenant}/{application}/{artifact}/{environment}.yml" } }],
      },
    });
    await ws.write("hello.yml", {
      apiVersion: "manent/v1",
      application: "hello",
      environment: "test",
      artifact: { type: "kubernetes", name: "hello", version: "1.0.0", source: ws.path("k8s/dist/hello-1.0.0.yaml") },
    });
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await cp?.stop();
    await pg?.stop();
  });

  it("4. dry-run: the deploy step's result is the tutorial's, and nothing is saved", async () => {
    const r = await cli("deploy", "-f", "hello.yml", "--dry-run", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { steps: { name: string; output: { result: string } }[] };
    const result = JSON.parse(out.steps.find((s) => s.name === "deploy")!.output.result) as { targets: Record<string, unknown>[] };
    for (const t of result.targets) delete t.duration_ms;
    assert.deepEqual(result, {
      plugin: "kubernetes",
      targets: [
        {
          host: "127.0.0.1",
          status: "ready",
          details: { cluster_version: "v1.34.2", namespace: "hello", objects_checked: "2", objects_skipped: "0" },
        },
      ],
    });
    assert.equal(await cp.get("apps/v1", "Deployment", "hello", "hello"), undefined);
  });

  it("5. deploy: rollout complete, labels, annotation and the two history ConfigMaps", async () => {
    const r = await cli("deploy", "-f", "hello.yml", "-o", "text");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /127\.0\.0\.1: deployed/);
    const dep = (await cp.get("apps/v1", "Deployment", "hello", "hello"))!;
    const meta = dep.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
    assert.deepEqual(
      {
        managedBy: meta.labels["app.kubernetes.io/managed-by"],
        app: meta.labels["manent.io/application"],
        artifact: meta.labels["manent.io/artifact"],
        tenant: meta.labels["manent.io/tenant"],
        env: meta.labels["manent.io/environment"],
        version: meta.annotations["manent.io/version"],
      },
      { managedBy: "manent", app: "hello", artifact: "hello", tenant: "untenanted", env: "test", version: "1.0.0" },
    );
    assert.equal((dep.status as { availableReplicas: number }).availableReplicas, 2);
    const names = (await cp.list("v1", "ConfigMap", "hello")).map((c) => (c.metadata as { name: string }).name);
    assert.ok(names.includes("manent-hello-test"), names.join(","));
    assert.ok(
      names.some((n) => /^manent-hello-test-1-0-0-[0-9a-f]{8}$/.test(n)),
      names.join(","),
    );
  });

  it("6. a stuck image is declared stuck, not retried, and rolled back to 1.0.0 without downloading", async () => {
    const v11 = await ws.write("k8s/dist/hello-1.1.0.yaml", stuckManifest());
    const r = await cli("deploy", "-f", "hello.yml", "--version", "1.1.0", "--source", v11, "-o", "json");
    assert.equal(r.code, 1);
    const d = JSON.parse(r.stdout) as {
      status: string;
      error: { message: string };
      steps: { name: string; attempts: number; status: string }[];
    };
    assert.equal(d.status, "rolled_back");
    assert.match(
      d.error.message,
      /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: rollout stuck: ReplicaSet "hello-[a-z0-9]+" has timed out progressing\.; rollback completed$/,
    );
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, "a stuck rollout is permanent");
    assert.equal(d.steps.find((s) => s.name === "rollback")!.status, "succeeded");
    const dep = (await cp.get("apps/v1", "Deployment", "hello", "hello"))!;
    const image = (dep.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!.image;
    assert.equal(
      `${image} ${(dep.metadata as { annotations: Record<string, string> }).annotations["manent.io/version"]}`,
      "hashicorp/http-echo:1.0 1.0.0",
    );
  });

  it("7. replicas scaled with kubectl, then a deploy: refused at once for the conflict, rolled back without taking replicas over", async () => {
    // The cluster's administrator scales by hand, as the reader would with kubectl.
    const reader = await cp.clusterAdminAccount("kube-system", "tutorial-reader");
    await ws.write("k8s/reader-ca.crt", reader.caPem);
    const kubectl = (...args: string[]) =>
      promisify(execFile)(`${toolsBin}/kubectl`, [
        `--server=${cp.url}`,
        `--certificate-authority=${ws.path("k8s/reader-ca.crt")}`,
        `--token=${reader.token}`,
        `--cache-dir=${ws.path("kubectl-cache")}`,
        ...args,
      ]);
    await kubectl("-n", "hello", "scale", "deployment", "hello", "--replicas=3");
    const scaled = (await cp.get("apps/v1", "Deployment", "hello", "hello"))!;

    const v12 = await ws.write("k8s/dist/hello-1.2.0.yaml", helloManifest.replace("hello from", "hi from"));
    const r = await cli("deploy", "-f", "hello.yml", "--version", "1.2.0", "--source", v12, "-o", "json");
    assert.equal(r.code, 1);
    const d = JSON.parse(r.stdout) as {
      status: string;
      error: { message: string };
      steps: { name: string; attempts: number; status: string }[];
    };
    assert.equal(d.status, "rolled_back");
    assert.match(
      d.error.message,
      /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: field manager conflict: Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps\/v1: \.spec\.replicas .*force_conflicts.*; rollback completed$/,
    );
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, "a conflict is permanent");
    const dep = (await cp.get("apps/v1", "Deployment", "hello", "hello"))!;
    assert.equal((dep.spec as { replicas: number }).replicas, 3, "the rollback did not take replicas over");
    assert.equal(dep.metadata.generation, scaled.metadata.generation, "nothing of the Deployment changed");
    const owners = (dep.metadata.managedFields as { manager: string; subresource?: string }[]).map(
      (m) => `${m.manager}${m.subresource ? `/${m.subresource}` : ""}`,
    );
    assert.ok(owners.includes("kubectl/scale"), owners.join(", "));
  });
});
