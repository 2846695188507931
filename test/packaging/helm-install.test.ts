import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { parse } from "yaml";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import type { KubeObj } from "../support/kube/kube-client.js";
import { repoRoot } from "../support/server-process.js";
import { findHelm } from "../plugins/kubernetes/find-helm.js";

const run = promisify(execFile);
const chart = join(repoRoot, "packaging/helm/manent-server");
const image = "registry.example.com/manent-server:0.1.0";
const values = [
  ["database.existingSecret", "manent-db"],
  ["tokens[0].name", "ci"],
  ["tokens[0].role", "deployer"],
  ["tokens[0].existingSecret", "manent-tokens"],
  ["tokens[0].key", "ci"],
  ["replicaCount", "3"],
].flatMap(([k, v]) => ["--set", `${k}=${v}`]);

interface PodStatus {
  containerStatuses?: { name: string; ready: boolean; state: { waiting?: { reason: string; message?: string } } }[];
}

/** The ready addresses the EndpointSlice controller gives the release's Service. */
async function readyEndpoints(cp: KubeControlPlane, ns: string, service: string): Promise<number> {
  const slices = await cp.admin.list("discovery.k8s.io/v1", "EndpointSlice", ns, `kubernetes.io/service-name=${service}`);
  return slices.flatMap((s) => (s.endpoints as { conditions: { ready: boolean } }[] | undefined) ?? []).filter((e) => e.conditions.ready)
    .length;
}

/** The waiting reason and message of the manent-server container of every pod of a release. */
async function waitingContainers(cp: KubeControlPlane, ns: string, release: string): Promise<string[]> {
  const pods = await cp.admin.list("v1", "Pod", ns, `app.kubernetes.io/instance=${release}`);
  return pods.map((p: KubeObj) => {
    const w = (p.status as PodStatus | undefined)?.containerStatuses?.find((c) => c.name === "manent-server")?.state.waiting;
    return w ? `${w.reason}: ${w.message ?? ""}` : "not waiting";
  });
}

/**
 * The Helm chart installed with helm on the real control plane (test/support/kube: the API server
 * and the controllers are real; the kubelet simulator makes a pod Running and Ready once its image
 * is declared pullable and the Secrets and ConfigMaps it references are there, without running
 * probes). Endpoints, availability and the PDB's counts are the real controllers' work.
 */
describe("the Helm chart on the real control plane", () => {
  const helm = findHelm();
  let cp: KubeControlPlane;
  let dir: string;
  const ns = "manent-system";

  before(async () => {
    assert.ok(helm, "helm: run scripts/ci/kubernetes.sh");
    dir = await mkdtemp(join(tmpdir(), "manent-chart-"));
    cp = await KubeControlPlane.start({ pullableImages: [image] });
    await writeKubeconfig();
  });
  after(async () => {
    await cp?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function helmRun(args: string[]): Promise<{ code: number; out: string }> {
    const env = {
      ...process.env,
      KUBECONFIG: join(dir, "kubeconfig"),
      HELM_CACHE_HOME: join(dir, "cache"),
      HELM_CONFIG_HOME: join(dir, "config"),
      HELM_DATA_HOME: join(dir, "data"),
    };
    return run(helm!, args, { env }).then(
      (r) => ({ code: 0, out: r.stdout + r.stderr }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }),
    );
  }

  async function writeKubeconfig(): Promise<void> {
    const admin = await cp.clusterAdminAccount(ns);
    await writeFile(join(dir, "ca.crt"), admin.caPem);
    await writeFile(
      join(dir, "kubeconfig"),
      `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "${cp.url}", certificate-authority: "${join(dir, "ca.crt")}"}}]
users: [{name: admin, user: {token: "${admin.token}"}}]
contexts: [{name: test, context: {cluster: test, user: admin, namespace: ${ns}}}]
current-context: test
`,
      { mode: 0o600 },
    );
  }

  it("installs with --wait on an external Postgres: Deployment available, PDB, Service with ready endpoints, probes and security as configured", async () => {
    for (const [name, key, value] of [
      ["manent-db", "database_url", "postgres://manent:pw@db.example.com:5432/manent"],
      ["manent-tokens", "ci", "a-ci-token"],
    ] as const) {
      await cp.admin.apply({ apiVersion: "v1", kind: "Secret", metadata: { name, namespace: ns }, stringData: { [key]: value } });
    }
    const install = await helmRun(["install", "manent", chart, "--namespace", ns, ...values, "--wait", "--timeout", "5m"]);
    assert.equal(install.code, 0, install.out);

    const deployment = (await cp.admin.get("apps/v1", "Deployment", ns, "manent-manent-server"))!;
    const status = deployment.status as { availableReplicas?: number; conditions: { type: string; status: string }[] };
    assert.equal(status.availableReplicas, 3);
    assert.equal(status.conditions.find((c) => c.type === "Available")?.status, "True");

    // The disruption controller's view: 3 healthy, 2 may be evicted with minAvailable 1.
    const pdb = await cp.admin.waitFor("the PDB's status", async () => {
      const p = await cp.admin.get("policy/v1", "PodDisruptionBudget", ns, "manent-manent-server");
      const s = p?.status as { currentHealthy?: number; disruptionsAllowed?: number } | undefined;
      return s?.currentHealthy === 3 ? s : undefined;
    });
    assert.equal(pdb.disruptionsAllowed, 2);

    // The Service selects the three ready pods (the EndpointSlice controller's work).
    const endpoints = await cp.admin.waitFor("three ready endpoints", async () => {
      const slices = await cp.admin.list("discovery.k8s.io/v1", "EndpointSlice", ns, "kubernetes.io/service-name=manent-manent-server");
      const ready = slices
        .flatMap((s) => (s.endpoints as { conditions: { ready: boolean } }[] | undefined) ?? [])
        .filter((e) => e.conditions.ready);
      return ready.length === 3 ? ready : undefined;
    });
    assert.equal(endpoints.length, 3);

    const pods = await cp.admin.list("v1", "Pod", ns, "app.kubernetes.io/instance=manent");
    assert.equal(pods.length, 3);
    const spec = pods[0]!.spec as {
      automountServiceAccountToken: boolean;
      securityContext: { runAsNonRoot: boolean; runAsUser: number };
      containers: {
        args: string[];
        env: {
          name: string;
          value?: string;
          valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
        }[];
        readinessProbe: { httpGet: { path: string; port: string } };
        startupProbe: { httpGet: { path: string; port: string } };
        livenessProbe: { tcpSocket: { port: string } };
        securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean; capabilities: { drop: string[] } };
        volumeMounts: { name: string; mountPath: string }[];
      }[];
      volumes: { name: string; emptyDir?: object }[];
    };
    const c = spec.containers[0]!;
    assert.deepEqual(c.args, ["-c", "/etc/manent/manent.yml", "serve", "--executor-id", "$(POD_NAME)"]);
    assert.deepEqual(c.readinessProbe.httpGet, { path: "/healthz", port: "http", scheme: "HTTP" });
    assert.deepEqual(c.startupProbe.httpGet, { path: "/healthz", port: "http", scheme: "HTTP" });
    assert.equal(c.livenessProbe.tcpSocket.port, "http");
    const env = new Map(c.env.map((e) => [e.name, e]));
    assert.deepEqual(env.get("MANENT_DATABASE_URL")?.valueFrom?.secretKeyRef, { name: "manent-db", key: "database_url" });
    assert.deepEqual(env.get("MANENT_TOKEN_0")?.valueFrom?.secretKeyRef, { name: "manent-tokens", key: "ci" });
    assert.equal(env.get("POD_NAME")?.valueFrom?.fieldRef?.fieldPath, "metadata.name");
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
    assert.equal(spec.securityContext.runAsNonRoot, true);
    assert.equal(spec.automountServiceAccountToken, false);
    const workdir = c.volumeMounts.find((m) => m.mountPath === "/var/lib/manent")!;
    assert.ok(spec.volumes.find((v) => v.name === workdir.name)?.emptyDir);
    // No secret value is in any object helm made (the release itself is a Secret of helm's: its manifest).
    const configMap = (await cp.admin.get("v1", "ConfigMap", ns, "manent-manent-server"))!;
    assert.doesNotMatch(JSON.stringify([configMap, deployment]), /a-ci-token|pw@db/);
    // The servers use the external Postgres of the Secret, never an embedded one of their own.
    const config = parse((configMap.data as Record<string, string>)["manent.yml"]!) as { dbos: { database_url: string } };
    assert.equal(config.dbos.database_url, "env:MANENT_DATABASE_URL");
    assert.deepEqual(cp.kubelet.errors, []);
  });

  it("a release whose database Secret is missing, or lacks the key, has no ready pod until the Secret is right", async () => {
    const release = "other";
    const service = "other-manent-server";
    const install = await helmRun([
      "install",
      release,
      chart,
      "--namespace",
      ns,
      ...values,
      "--set",
      "database.existingSecret=other-db",
      "--set",
      "replicaCount=2",
    ]);
    assert.equal(install.code, 0, install.out);
    // A kubelet cannot make the container's environment: the pods wait, naming the Secret.
    await cp.admin.waitFor("pods waiting on the missing Secret", async () => {
      const w = await waitingContainers(cp, ns, release);
      return w.length === 2 && w.every((s) => s === 'CreateContainerConfigError: secret "other-db" not found') ? w : undefined;
    });
    assert.equal(await readyEndpoints(cp, ns, service), 0);

    await cp.admin.apply({ apiVersion: "v1", kind: "Secret", metadata: { name: "other-db", namespace: ns }, stringData: { url: "x" } });
    await cp.admin.waitFor("pods waiting on the missing key", async () => {
      const w = await waitingContainers(cp, ns, release);
      return w.length === 2 && w.every((s) => s === `CreateContainerConfigError: couldn't find key database_url in Secret ${ns}/other-db`)
        ? w
        : undefined;
    });
    const deployment = (await cp.admin.get("apps/v1", "Deployment", ns, service))!;
    assert.equal((deployment.status as { availableReplicas?: number }).availableReplicas ?? 0, 0);
    assert.equal(await readyEndpoints(cp, ns, service), 0);

    // With the key there, the same pods start: helm's own wait (an upgrade with --wait) sees the release ready.
    await cp.admin.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "other-db", namespace: ns },
      stringData: { database_url: "postgres://manent:pw@db.example.com:5432/other" },
    });
    const upgrade = await helmRun(["upgrade", release, chart, "--namespace", ns, "--reuse-values", "--wait", "--timeout", "5m"]);
    assert.equal(upgrade.code, 0, upgrade.out);
    assert.deepEqual(await waitingContainers(cp, ns, release), ["not waiting", "not waiting"]);
    assert.equal(
      await cp.admin.waitFor("two ready endpoints", async () => ((await readyEndpoints(cp, ns, service)) === 2 ? 2 : undefined)),
      2,
    );
    assert.deepEqual(cp.kubelet.errors, []);
  });
});
