import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { parse, stringify } from "yaml";
import { tlsFetch } from "../../src/cli/tls-transport.js";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import type { KubeObj } from "../support/kube/kube-client.js";
import { repoRoot, runCli, startServer } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { TestCa } from "../support/test-ca.js";
import { findHelm } from "../plugins/kubernetes/find-helm.js";
import { helloManifest, pullableImages } from "../plugins/kubernetes/helpers.js";

const run = promisify(execFile);
const chart = join(repoRoot, "packaging/helm/manent-server");
const image = "registry.example.com/manent-server:0.1.0";
const pluginsImage = "registry.example.com/manent-plugins:1.0.0";
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
    cp = await KubeControlPlane.start({ pullableImages: [image, pluginsImage, ...pullableImages] });
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
        livenessProbe: { httpGet: { path: string; port: string } };
        securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean; capabilities: { drop: string[] } };
        volumeMounts: { name: string; mountPath: string }[];
      }[];
      volumes: { name: string; emptyDir?: object }[];
    };
    const c = spec.containers[0]!;
    assert.deepEqual(c.args, ["-c", "/etc/manent/manent.yml", "serve", "--executor-id", "$(POD_NAME)"]);
    assert.deepEqual(c.readinessProbe.httpGet, { path: "/readyz", port: "http", scheme: "HTTP" });
    assert.deepEqual(c.startupProbe.httpGet, { path: "/readyz", port: "http", scheme: "HTTP" });
    assert.deepEqual(c.livenessProbe.httpGet, { path: "/livez", port: "http", scheme: "HTTP" });
    const env = new Map(c.env.map((e) => [e.name, e]));
    assert.deepEqual(env.get("MANENT_DATABASE_URL")?.valueFrom?.secretKeyRef, { name: "manent-db", key: "database_url" });
    assert.deepEqual(env.get("MANENT_TOKEN_0")?.valueFrom?.secretKeyRef, { name: "manent-tokens", key: "ci" });
    assert.equal(env.get("POD_NAME")?.valueFrom?.fieldRef?.fieldPath, "metadata.name");
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
    assert.equal(spec.securityContext.runAsNonRoot, true);
    // The in-cluster kubernetes plugin reads the pod's service account token (an account of the chart's own).
    assert.equal(spec.automountServiceAccountToken, true);
    assert.equal((spec as { serviceAccountName?: string }).serviceAccountName, "manent-manent-server");
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

  it("installs a working server: envconfig, TLS, plugins image, extra volumes and env, ServiceAccount and RBAC, Ingress, ServiceMonitor, NetworkPolicy; a server started from what it installed deploys into the cluster as its service account", async () => {
    const release = "full";
    const fullname = "full-manent-server";
    const pg = await TestPostgres.start();
    const root = join(dir, "pod"); // the pod's filesystem, as its mounts lay it out
    try {
      const ca = await TestCa.create("manent-chart-ca");
      const serving = await ca.server();
      const token = "full-chart-token";
      await cp.namespace("apps");
      await cp.installCrds([serviceMonitorCrd]);
      for (const secret of [
        { metadata: { name: "full-db" }, stringData: { database_url: "postgres://manent:pw@db.example.com:5432/full" } },
        { metadata: { name: "full-tokens" }, stringData: { ci: token } },
        {
          metadata: { name: "full-tls" },
          type: "kubernetes.io/tls",
          stringData: { "tls.crt": serving.certPem, "tls.key": serving.keyPem },
        },
        { metadata: { name: "full-ssh" }, stringData: { id_ed25519: "not a real key" } },
      ])
        await cp.admin.apply({ apiVersion: "v1", kind: "Secret", ...secret, metadata: { ...secret.metadata, namespace: ns } });
      await cp.admin.apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "full-env", namespace: ns }, data: { TEAM: "a" } });
      await cp.admin.apply({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "team-b-envconfig", namespace: ns },
        data: { "hello.test.yml": "plugin: kubernetes\ntargets: [{host: 127.0.0.1, port: 1}]\n" },
      });
      const envconfig = {
        plugin: "kubernetes",
        targets: [{ host: cp.host, port: cp.port }],
        params: { namespace: "apps", token_secret: "kube-token", ca_secret: "kube-ca", "var.REPLICAS": "1", wait_timeout: "3m" },
        secrets: [
          { name: "kube-token", ref: "file:/var/run/secrets/kubernetes.io/serviceaccount/token" },
          { name: "kube-ca", ref: "file:/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" },
        ],
      };
      const valuesFile = join(dir, "full-values.yml");
      await writeFile(
        valuesFile,
        stringify({
          replicaCount: 2,
          database: { existingSecret: "full-db" },
          tokens: [{ name: "ci", role: "deployer", tenant: "team-a", existingSecret: "full-tokens", key: "ci" }],
          envconfig: {
            files: { "team-a/hello/hello/test.yml": stringify(envconfig) },
            existingConfigMap: { name: "team-b-envconfig", items: [{ key: "hello.test.yml", path: "team-b/hello/hello/test.yml" }] },
          },
          tls: { existingSecret: "full-tls" },
          pluginsImage: { repository: pluginsImage.split(":")[0], tag: "1.0.0" },
          extraEnv: [{ name: "MANENT_EXTRA", value: "extra" }],
          envFrom: [{ configMapRef: { name: "full-env" } }],
          extraVolumes: [{ name: "ssh", secret: { secretName: "full-ssh", defaultMode: 0o400 } }],
          extraVolumeMounts: [{ name: "ssh", mountPath: "/etc/manent-ssh", readOnly: true }],
          rbac: { create: true, namespaces: ["apps"] },
          ingress: {
            enabled: true,
            className: "nginx",
            hosts: [{ host: "manent.example.com" }],
            tls: [{ secretName: "full-tls", hosts: ["manent.example.com"] }],
          },
          serviceMonitor: { enabled: true, labels: { release: "prometheus" } },
          networkPolicy: { enabled: true, from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress" } } }] },
          podAntiAffinity: "hard",
        }),
      );
      const install = await helmRun(["install", release, chart, "--namespace", ns, "-f", valuesFile, "--wait", "--timeout", "5m"]);
      assert.equal(install.code, 0, install.out);

      // Every object the chart rendered was accepted by the API server, and the controllers acted on them.
      const deployment = (await cp.admin.get("apps/v1", "Deployment", ns, fullname))!;
      assert.equal((deployment.status as { availableReplicas?: number }).availableReplicas, 2);
      assert.ok(await cp.admin.get("v1", "ServiceAccount", ns, fullname));
      assert.ok(await cp.admin.get("rbac.authorization.k8s.io/v1", "Role", "apps", fullname));
      const binding = (await cp.admin.get("rbac.authorization.k8s.io/v1", "RoleBinding", "apps", fullname))!;
      assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: fullname, namespace: ns }]);
      const ingress = (await cp.admin.get("networking.k8s.io/v1", "Ingress", ns, fullname))!;
      assert.deepEqual((ingress.spec as { rules: { http: { paths: { backend: unknown }[] } }[] }).rules[0]!.http.paths[0]!.backend, {
        service: { name: fullname, port: { name: "http" } },
      });
      const monitor = (await cp.admin.get("monitoring.coreos.com/v1", "ServiceMonitor", ns, fullname))!;
      const service = (await cp.admin.get("v1", "Service", ns, fullname))!;
      // The monitor's selector finds the Service by its labels, on its named port, over HTTPS (TLS is on).
      const selector = (monitor.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
      const serviceLabels = service.metadata.labels as Record<string, string>;
      for (const [k, v] of Object.entries(selector)) assert.equal(serviceLabels[k], v, k);
      assert.deepEqual(
        (monitor.spec as { endpoints: { port: string; scheme: string }[] }).endpoints.map((e) => [e.port, e.scheme]),
        [["http", "https"]],
      );
      assert.ok(await cp.admin.get("networking.k8s.io/v1", "NetworkPolicy", ns, fullname));
      const pod = (await cp.admin.list("v1", "Pod", ns, `app.kubernetes.io/instance=${release}`))[0]!;
      const podSpec = pod.spec as {
        serviceAccountName: string;
        initContainers: { name: string; image: string }[];
        containers: { env: { name: string }[]; envFrom: unknown[]; volumeMounts: { name: string; mountPath: string }[] }[];
        affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: unknown[] } };
        volumes: { name: string; projected?: { sources: { configMap: { name: string; items: { key: string; path: string }[] } }[] } }[];
      };
      assert.equal(podSpec.serviceAccountName, fullname);
      assert.deepEqual(
        podSpec.initContainers.map((c) => [c.name, c.image]),
        [["plugins", pluginsImage]],
      );
      const container = podSpec.containers[0]!;
      assert.ok(container.env.some((e) => e.name === "MANENT_EXTRA"));
      assert.deepEqual(container.envFrom, [{ configMapRef: { name: "full-env" } }]);
      assert.deepEqual(container.volumeMounts.map((m) => m.mountPath).sort(), [
        "/etc/manent",
        "/etc/manent-ssh",
        "/etc/manent-tls",
        "/opt/manent/plugins",
        "/tmp",
        "/var/lib/manent",
        "/var/run/secrets/kubernetes.io/serviceaccount",
      ]);
      assert.equal(podSpec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.length, 1);
      assert.deepEqual(cp.kubelet.errors, []);

      // A server started from what was installed: the files of the pod's mounts (ConfigMaps laid out by
      // the pod's own projected items, the TLS Secret, the service account's token and CA), the pod's
      // environment from the Secrets, and nothing else. Only the roots of the mounts move under a temp dir.
      const mounts: [string, string][] = [
        ["/etc/manent-tls", join(root, "tls")],
        ["/etc/manent", join(root, "config")],
        ["/var/lib/manent", join(root, "work")],
        ["/var/run/secrets/kubernetes.io/serviceaccount", join(root, "serviceaccount")],
      ];
      const local = (text: string): string => mounts.reduce((t, [from, to]) => t.split(from).join(to), text);
      const configVolume = podSpec.volumes.find((v) => v.name === "config")!.projected!;
      for (const source of configVolume.sources) {
        const data = (await cp.admin.get("v1", "ConfigMap", ns, source.configMap.name))!.data as Record<string, string>;
        for (const item of source.configMap.items) {
          const file = join(root, "config", item.path);
          await mkdir(dirname(file), { recursive: true });
          await writeFile(file, local(data[item.key]!));
        }
      }
      await mkdir(join(root, "tls"), { recursive: true });
      await writeFile(join(root, "tls/tls.crt"), serving.certPem);
      await writeFile(join(root, "tls/tls.key"), serving.keyPem, { mode: 0o600 });
      await writeFile(join(dir, "ca.pem"), ca.certPem);
      const account = await cp.serviceAccountToken(ns, fullname);
      await mkdir(join(root, "serviceaccount"), { recursive: true });
      await writeFile(join(root, "serviceaccount/token"), account.token, { mode: 0o600 });
      await writeFile(join(root, "serviceaccount/ca.crt"), account.caPem);
      // The second envconfig came from the user's ConfigMap, through the items the values gave.
      assert.match(await readFile(join(root, "config/envconfig/team-b/hello/hello/test.yml"), "utf8"), /plugin: kubernetes/);

      const server = await startServer(join(root, "config/manent.yml"), {
        cwd: root,
        token,
        env: { MANENT_DATABASE_URL: await pg.createDatabase(), MANENT_TOKEN_0: token },
        fetch: await tlsFetch({ caFile: join(dir, "ca.pem") }),
      });
      try {
        assert.match(server.url, /^https:\/\//);
        await writeFile(join(root, "hello-1.0.0.yaml"), helloManifest);
        await writeFile(
          join(root, "hello.yml"),
          stringify({
            apiVersion: "manent/v1",
            tenant: "team-a",
            application: "hello",
            environment: "test",
            artifact: { type: "kubernetes", name: "hello", version: "1.0.0", source: join(root, "hello-1.0.0.yaml") },
          }),
        );
        const r = await runCli(["--ca-file", join(dir, "ca.pem"), "deploy", "-f", "hello.yml", "-o", "json"], {
          cwd: root,
          server: server.url,
          token,
        });
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.equal((JSON.parse(r.stdout) as { status: string }).status, "succeeded");
        // Applied by the chart's service account, allowed by the chart's Role in apps.
        const applied = await cp.admin.get("apps/v1", "Deployment", "apps", "hello");
        assert.ok(applied);
        const writes = (await cp.auditedRequests()).filter(
          (a) => a.verb === "patch" && a.requestURI.startsWith("/apis/apps/v1/namespaces/apps/deployments/hello"),
        );
        assert.ok(writes.length > 0);
        assert.ok(
          writes.every((a) => a.user === `system:serviceaccount:${ns}:${fullname}`),
          JSON.stringify(writes.map((a) => a.user)),
        );
      } finally {
        await server.stop();
      }
    } finally {
      await pg.stop();
    }
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

/** The Prometheus Operator's ServiceMonitor kind, with an open schema (the operator itself does not run here). */
const serviceMonitorCrd: KubeObj = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "servicemonitors.monitoring.coreos.com" },
  spec: {
    group: "monitoring.coreos.com",
    scope: "Namespaced",
    names: { plural: "servicemonitors", singular: "servicemonitor", kind: "ServiceMonitor", listKind: "ServiceMonitorList" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } },
        },
      },
    ],
  },
};
