import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeClient, KubeRequestError, type KubeObj } from "./kube-client.js";
import { KubeletSimulator, type KubeletSimulatorOptions } from "./kubelet-simulator.js";
import { generatePki } from "./pki.js";
import { controlPlaneBinary, freePort, ManagedProcess } from "./processes.js";

/** What scripts/ci/kube-control-plane.sh builds, and so what /version reports. */
export const kubeVersion = "v1.34.2";

export interface ControlPlaneOptions extends KubeletSimulatorOptions {
  /** Keep the temp dir (logs, etcd data) after stop(), for debugging a failed test. */
  keepDir?: boolean;
}

/** How long each part took to become ready, in ms (printed by bench/kube-control-plane.ts). */
export interface StartTimings {
  etcd: number;
  apiserver: number;
  controllerManager: number;
  total: number;
}

/** One request the API server audited (users outside the control plane and the harness). */
export interface AuditedRequest {
  verb: string;
  requestURI: string;
  user: string;
  code: number | undefined;
  /** Microsecond timestamps as the server wrote them. */
  received: string;
  completed: string;
}

/** Credentials made through the API, as the tutorial makes them: a service account's token Secret. */
export interface ClusterAccess {
  token: string;
  /** The CA from the token Secret's `ca.crt` (the kube-controller-manager's --root-ca-file). */
  caPem: string;
  user: string;
}

/** The Role of the tutorial's section 1, for namespace `ns`, as YAML rules. */
export const tutorialRoleRules = [
  { apiGroups: [""], resources: ["configmaps", "services"], verbs: ["get", "list", "watch", "create", "update", "patch", "delete"] },
  {
    apiGroups: ["apps"],
    resources: ["deployments", "replicasets"],
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
  },
  { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
];

/** A PolicyRule of a Role or ClusterRole. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # The control plane's own traffic and the harness's admin (system:masters) are not what tests look at.
  - level: None
    userGroups: ["system:serviceaccounts:kube-system", "system:nodes", "system:masters"]
  - level: None
    users: ["system:kube-controller-manager", "system:apiserver", "system:kube-scheduler"]
  - level: Metadata
`;

/**
 * A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager,
 * built by scripts/ci/kube-control-plane.sh, on free loopback ports with a temp dir of their own,
 * plus the kubelet simulator (the only stand-in, see README.md). The API server authenticates with
 * a static token file (the harness's admin) and service-account tokens, authorizes with RBAC, and
 * audits every request of non-system users so tests can see what a client sent.
 */
export class KubeControlPlane {
  readonly host = "127.0.0.1";
  readonly gitVersion = kubeVersion;
  private stopped = false;

  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly caPem: string,
    /** The harness's client, as a cluster admin (system:masters). */
    readonly admin: KubeClient,
    readonly kubelet: KubeletSimulator,
    private readonly processes: ManagedProcess[],
    readonly timings: StartTimings,
    private readonly opts: ControlPlaneOptions,
  ) {}

  get url(): string {
    return `https://${this.host}:${this.port}`;
  }

  static async start(opts: ControlPlaneOptions = {}): Promise<KubeControlPlane> {
    // A port taken between freePort() and the bind is rare, but another developer's test may win it.
    for (let attempt = 1; ; attempt++) {
      try {
        return await KubeControlPlane.startOnce(opts);
      } catch (err) {
        if (attempt >= 2 || !String(err).includes("address already in use")) throw err;
      }
    }
  }

  private static async startOnce(opts: ControlPlaneOptions): Promise<KubeControlPlane> {
    const binaries = {
      etcd: controlPlaneBinary("etcd"),
      apiserver: controlPlaneBinary("kube-apiserver"),
      kcm: controlPlaneBinary("kube-controller-manager"),
    };
    const t0 = performance.now();
    const dir = await mkdtemp(join(tmpdir(), "manent-kube-"));
    const processes: ManagedProcess[] = [];
    const fail = async (err: unknown): Promise<never> => {
      await Promise.all(processes.map((p) => p.stop(1000)));
      if (!opts.keepDir) await rm(dir, { recursive: true, force: true });
      throw err;
    };
    try {
      const pki = await generatePki();
      const adminToken = randomBytes(24).toString("hex");
      const kcmToken = randomBytes(24).toString("hex");
      const files = {
        ca: join(dir, "ca.crt"),
        cert: join(dir, "apiserver.crt"),
        key: join(dir, "apiserver.key"),
        saKey: join(dir, "sa.key"),
        saPub: join(dir, "sa.pub"),
        tokens: join(dir, "tokens.csv"),
        audit: join(dir, "audit.log"),
        auditPolicy: join(dir, "audit-policy.yaml"),
        kcmKubeconfig: join(dir, "kube-controller-manager.kubeconfig"),
      };
      await writeFile(files.ca, pki.caPem);
      await writeFile(files.cert, pki.servingCertPem);
      await writeFile(files.key, pki.servingKeyPem, { mode: 0o600 });
      await writeFile(files.saKey, pki.serviceAccountKeyPem, { mode: 0o600 });
      await writeFile(files.saPub, pki.serviceAccountPubPem);
      // token,user,uid,"groups": the harness's admin, and the controller manager's own identity.
      await writeFile(
        files.tokens,
        `${adminToken},manent-test-admin,manent-test-admin,"system:masters"\n${kcmToken},system:kube-controller-manager,system:kube-controller-manager\n`,
        { mode: 0o600 },
      );
      await writeFile(files.auditPolicy, auditPolicy);
      await mkdir(join(dir, "etcd"), { mode: 0o700 });
      await mkdir(join(dir, "certs"));

      // etcd
      const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
      const etcdUrl = `http://127.0.0.1:${etcdPort}`;
      const peerUrl = `http://127.0.0.1:${peerPort}`;
      const etcd = ManagedProcess.start(
        "etcd",
        binaries.etcd,
        [
          "--name=default",
          `--data-dir=${join(dir, "etcd")}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=default=${peerUrl}`,
          // A test cluster's data is thrown away: fsync would only make the shared disk slower.
          "--unsafe-no-fsync",
          "--log-level=warn",
        ],
        join(dir, "etcd.log"),
      );
      processes.push(etcd);
      await waitHttpOk(etcd, `${etcdUrl}/health`, undefined, (body) => body.includes('"health":"true"'));
      const tEtcd = performance.now();

      // kube-apiserver
      const apiserver = ManagedProcess.start(
        "kube-apiserver",
        binaries.apiserver,
        [
          `--etcd-servers=${etcdUrl}`,
          "--bind-address=127.0.0.1",
          "--advertise-address=127.0.0.1",
          `--secure-port=${apiPort}`,
          `--cert-dir=${join(dir, "certs")}`,
          `--tls-cert-file=${files.cert}`,
          `--tls-private-key-file=${files.key}`,
          `--token-auth-file=${files.tokens}`,
          "--authorization-mode=RBAC",
          "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
          `--service-account-key-file=${files.saPub}`,
          `--service-account-signing-key-file=${files.saKey}`,
          "--service-cluster-ip-range=10.96.0.0/16",
          // No kube-proxy or pods reach the API server through its Service: no endpoints to keep.
          "--endpoint-reconciler-type=none",
          `--audit-policy-file=${files.auditPolicy}`,
          `--audit-log-path=${files.audit}`,
          "--profiling=false",
        ],
        join(dir, "kube-apiserver.log"),
      );
      processes.push(apiserver);
      const server = new URL(`https://127.0.0.1:${apiPort}`);
      const admin = new KubeClient(server, pki.caPem, adminToken);
      await waitHttpOk(apiserver, `${server.origin}/readyz`, admin, (body) => body.trim() === "ok");
      const tApi = performance.now();

      // kube-controller-manager: its own identity, and one service account per controller
      // (--use-service-account-credentials), as kubeadm runs it.
      await writeFile(files.kcmKubeconfig, kubeconfig(server.origin, files.ca, kcmToken), { mode: 0o600 });
      const kcm = ManagedProcess.start(
        "kube-controller-manager",
        binaries.kcm,
        [
          `--kubeconfig=${files.kcmKubeconfig}`,
          "--leader-elect=false",
          "--secure-port=0",
          "--use-service-account-credentials=true",
          // Each controller starts with calls of its own (its service account, its token): at the
          // default client rate (20/s) about 40 controllers took 5 s to start, one after another.
          "--kube-api-qps=500",
          "--kube-api-burst=1000",
          `--service-account-private-key-file=${files.saKey}`,
          `--root-ca-file=${files.ca}`,
          "--profiling=false",
        ],
        join(dir, "kube-controller-manager.log"),
      );
      processes.push(kcm);
      // Ready when its service-account controller has made the `default` namespace's account.
      await admin.waitFor(
        "kube-controller-manager to create default/default",
        async () => {
          if (!kcm.running) throw new Error(`kube-controller-manager exited:\n${kcm.tail()}`);
          return admin.get("v1", "ServiceAccount", "default", "default");
        },
        120_000,
      );
      const tKcm = performance.now();

      const kubelet = await KubeletSimulator.start(admin, opts);
      const timings = {
        etcd: Math.round(tEtcd - t0),
        apiserver: Math.round(tApi - tEtcd),
        controllerManager: Math.round(tKcm - tApi),
        total: Math.round(performance.now() - t0),
      };
      return new KubeControlPlane(dir, apiPort, pki.caPem, admin, kubelet, processes, timings, opts);
    } catch (err) {
      const logs = processes.map((p) => `--- ${p.name} (${p.logFile}):\n${p.tail(1500)}`).join("\n");
      return fail(new Error(`${(err as Error).message}\n${logs}`, { cause: err }));
    }
  }

  /**
   * Stops the simulator, the controller manager, the API server and etcd, and removes the temp dir.
   * Its processes are killed at once (their data is thrown away): kube-apiserver's own stop on
   * SIGTERM took 1.1 s, a second of it its ServiceCIDR allocator's, at each of the suite's ~20
   * control planes. With `keepDir` they stop in turn on SIGTERM, so the logs kept are complete.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.kubelet.stop();
    this.admin.close();
    if (this.opts.keepDir) for (const p of [...this.processes].reverse()) await p.stop();
    else {
      await Promise.all(this.processes.map((p) => p.kill()));
      await rm(this.dir, { recursive: true, force: true });
    }
  }

  /** A client for any token (a service account's, a wrong one) against this API server. */
  client(token: string): KubeClient {
    return new KubeClient(new URL(this.url), this.caPem, token);
  }

  /** Creates a namespace (if missing) and waits for its `default` service account, which pods need. */
  async namespace(name: string): Promise<void> {
    await this.admin.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await this.admin.waitFor(`service account ${name}/default`, () => this.admin.get("v1", "ServiceAccount", name, "default"));
  }

  /**
   * A service account's token, as the tutorial's section 1 gets it: a Secret of type
   * `kubernetes.io/service-account-token` annotated with the account, filled in by the real token
   * controller with `token` and `ca.crt`.
   */
  async serviceAccountToken(namespace: string, account: string, secretName = `${account}-token`): Promise<ClusterAccess> {
    await this.admin.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: secretName, namespace, annotations: { "kubernetes.io/service-account.name": account } },
      type: "kubernetes.io/service-account-token",
    });
    const data = await this.admin.waitFor(`the token controller to fill ${namespace}/${secretName}`, async () => {
      const s = await this.admin.get("v1", "Secret", namespace, secretName);
      const d = s?.data as Record<string, string> | undefined;
      return d?.token && d["ca.crt"] ? d : undefined;
    });
    return {
      token: Buffer.from(data.token!, "base64").toString("utf8"),
      caPem: Buffer.from(data["ca.crt"]!, "base64").toString("utf8"),
      user: `system:serviceaccount:${namespace}:${account}`,
    };
  }

  /**
   * A service account `account` in `namespace` bound to a Role with `rules` there (the tutorial's
   * rules by default), and its token. Creates the namespace when missing.
   */
  async serviceAccount(namespace: string, account = "manent", rules: PolicyRule[] = tutorialRoleRules): Promise<ClusterAccess> {
    await this.namespace(namespace);
    const role = `${account}-deployer`;
    await this.admin.apply({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: account, namespace } });
    await this.admin.apply({ apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: role, namespace }, rules });
    await this.admin.apply({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: role, namespace },
      subjects: [{ kind: "ServiceAccount", name: account, namespace }],
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role },
    });
    return this.serviceAccountToken(namespace, account);
  }

  /** A service account bound to the `cluster-admin` ClusterRole (for tests about something other than RBAC). */
  async clusterAdminAccount(namespace: string, account = "manent-admin"): Promise<ClusterAccess> {
    await this.namespace(namespace);
    await this.admin.apply({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: account, namespace } });
    await this.admin.apply({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: `${namespace}-${account}` },
      subjects: [{ kind: "ServiceAccount", name: account, namespace }],
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    });
    return this.serviceAccountToken(namespace, account);
  }

  /**
   * The requests the API server audited, up to now: a sentinel request is made and awaited in the
   * log, so every request that completed before this call is in the answer.
   */
  async auditedRequests(): Promise<AuditedRequest[]> {
    const sentinel = randomUUID();
    await this.client("")
      .request("GET", "/version", { query: { sentinel } })
      .catch(() => undefined);
    const file = join(this.dir, "audit.log");
    const events = await this.admin.waitFor(
      "the audit log to catch up",
      async () => {
        const text = await readFile(file, "utf8").catch(() => "");
        return text.includes(sentinel) ? text : undefined;
      },
      30_000,
    );
    const out: AuditedRequest[] = [];
    for (const line of events.split("\n")) {
      if (!line) continue;
      const e = JSON.parse(line) as {
        stage: string;
        verb: string;
        requestURI: string;
        user: { username: string };
        responseStatus?: { code?: number };
        requestReceivedTimestamp: string;
        stageTimestamp: string;
      };
      if (e.stage !== "ResponseComplete" || e.requestURI.includes(sentinel)) continue;
      out.push({
        verb: e.verb,
        requestURI: e.requestURI,
        user: e.user.username,
        code: e.responseStatus?.code,
        received: e.requestReceivedTimestamp,
        completed: e.stageTimestamp,
      });
    }
    return out;
  }

  /**
   * Applies CustomResourceDefinitions (Gateway API's, a test's own) and waits until each is
   * Established and its kind is served, so custom resources can be applied right after.
   */
  async installCrds(crds: KubeObj[]): Promise<void> {
    for (const crd of crds) await this.admin.apply(crd);
    for (const crd of crds) {
      const name = String(crd.metadata.name);
      const spec = crd.spec as { group: string; names: { kind: string }; versions: { name: string; served?: boolean }[] };
      await this.admin.waitFor(`CRD ${name} established`, async () => {
        const live = await this.admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", undefined, name);
        const conditions = (live?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? [];
        return conditions.some((c) => c.type === "Established" && c.status === "True") ? true : undefined;
      });
      for (const v of spec.versions.filter((x) => x.served !== false)) {
        await this.admin.waitFor(`${spec.names.kind} served in ${spec.group}/${v.name}`, () =>
          this.admin.pathOf(`${spec.group}/${v.name}`, spec.names.kind).then(
            () => true,
            () => undefined,
          ),
        );
      }
    }
  }

  /** Objects of a kind in a namespace, by label selector; for assertions. */
  list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): Promise<KubeObj[]> {
    return this.admin.list(apiVersion, kind, namespace, labelSelector);
  }

  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): Promise<KubeObj | undefined> {
    return this.admin.get(apiVersion, kind, namespace, name);
  }
}

function kubeconfig(server: string, caFile: string, token: string): string {
  return `apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "${server}", certificate-authority: "${caFile}"}}]
users: [{name: kcm, user: {token: "${token}"}}]
contexts: [{name: local, context: {cluster: local, user: kcm}}]
current-context: local
`;
}

/** Polls a health endpoint until `ok(body)`; fails at once when the process exits. */
async function waitHttpOk(
  proc: ManagedProcess,
  url: string,
  client: KubeClient | undefined,
  ok: (body: string) => boolean,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 20;
  for (;;) {
    if (!proc.running) throw new Error(`${proc.name} exited before it was ready:\n${proc.tail()}`);
    try {
      let body: string;
      if (client) {
        const r = await client.request("GET", new URL(url).pathname).catch((e: unknown) => {
          if (e instanceof KubeRequestError) return e.body.message ?? "";
          throw e;
        });
        body = typeof r === "string" ? r : ((r as { message?: string }).message ?? JSON.stringify(r));
      } else {
        body = await (await fetch(url)).text();
      }
      if (ok(body)) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} not ready after ${timeoutMs} ms:\n${proc.tail()}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 250);
  }
}
