import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger, Request, RollbackRequest, SecretsAccessor, TargetRelease } from "../../../src/plugin.js";
import { Code, ManentError } from "../../../src/plugin.js";
import type { ClusterAccess, KubeControlPlane } from "../../support/kube/control-plane.js";
import type { KubeObj } from "../../support/kube/kube-client.js";

/** Secrets from a map, failing like the engine's accessor on an unknown name. */
export function secretsOf(values: Record<string, string>): SecretsAccessor & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    secret(name: string): Promise<string> {
      asked.push(name);
      const v = values[name];
      return v === undefined ? Promise.reject(new ManentError(Code.NotFound, `secret ${name} is not declared`)) : Promise.resolve(v);
    },
  };
}

export interface LogLine {
  level: string;
  msg: string;
  attrs?: Record<string, unknown>;
}

export function memoryLogger(lines: LogLine[] = []): Logger & { lines: LogLine[] } {
  const at = (level: string) => (msg: string, attrs?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...(attrs ? { attrs } : {}) });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

export interface RequestInput {
  clusters: { host: string; port: number }[];
  /** Each cluster's service-account credentials (same order as `clusters`). */
  access: ClusterAccess[];
  artifactPath: string;
  version: string;
  params?: Record<string, string>;
  application?: string;
  environment?: string;
  artifactName?: string;
  parallelism?: number;
}

/**
 * A Request as the engine builds it for the tutorial's environment: one target per cluster, the
 * token and CA as secrets (`kube-token`, `kube-ca`). With several clusters each target names its
 * own token secret (`kube-token-<i>`, target label token_secret) and `kube-ca` holds every CA.
 */
export function makeRequest(input: RequestInput): Request {
  const several = input.clusters.length > 1;
  const secrets: Record<string, string> = { "kube-ca": input.access.map((a) => a.caPem).join("\n") };
  input.access.forEach((a, i) => (secrets[several ? `kube-token-${i}` : "kube-token"] = `${a.token}\n`));
  return {
    deploymentId: `dep-${input.version}`,
    tenant: "untenanted",
    application: input.application ?? "hello",
    environment: input.environment ?? "test",
    artifact: {
      type: "kubernetes",
      name: input.artifactName ?? "hello",
      version: input.version,
      source: input.artifactPath,
      path: input.artifactPath,
    },
    targets: input.clusters.map((c, i) => ({
      host: c.host,
      port: c.port,
      labels: (several ? { token_secret: `kube-token-${i}` } : {}) as Record<string, string>,
    })),
    params: {
      namespace: "hello",
      token_secret: several ? "kube-token-0" : "kube-token",
      ca_secret: "kube-ca",
      wait_timeout: "60s",
      ...input.params,
    },
    secrets: secretsOf(secrets),
    parallelism: input.parallelism ?? 1,
    logger: memoryLogger(),
    signal: new AbortController().signal,
  };
}

/** The images the kubelet simulator pulls in the plugin's tests; `:does-not-exist` is not one. */
export const pullableImages: (string | RegExp)[] = [
  "hashicorp/http-echo:1.0",
  "nginx:1.27",
  "nginx:1.26",
  "postgres:17",
  "fluent-bit:3",
  "busybox:1.36",
  /@sha256:[a-f0-9]{64}$/,
];

/** The history ConfigMaps in a namespace (not the cluster's own kube-root-ca.crt), sorted by name. */
export async function historyConfigMaps(cp: KubeControlPlane, namespace = "hello"): Promise<KubeObj[]> {
  const cms = await cp.list("v1", "ConfigMap", namespace, "manent.io/history");
  return cms.sort((a, b) => String(a.metadata.name).localeCompare(String(b.metadata.name)));
}

/** An object's labels, annotations, spec and status, typed loosely for assertions. */
export interface Loose {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    generation?: number;
    resourceVersion?: string;
    managedFields?: { manager: string; operation: string; subresource?: string; fieldsV1?: unknown }[];
  };
  spec?: any;
  status?: any;
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

/** GET through the harness's admin, as a loosely typed object (undefined when absent). */
export async function getObj(
  cp: KubeControlPlane,
  apiVersion: string,
  kind: string,
  name: string,
  namespace: string | undefined = "hello",
): Promise<Loose | undefined> {
  return (await cp.get(apiVersion, kind, namespace, name)) as unknown as Loose | undefined;
}

/** Managers of an object's fields other than the status writers (controllers, the kubelet simulator). */
export function specManagers(obj: Loose): string[] {
  return (obj.metadata.managedFields ?? []).filter((m) => m.subresource !== "status").map((m) => `${m.manager}/${m.operation}`);
}

export function rollbackRequest(req: Request, releases: TargetRelease[]): RollbackRequest {
  return { ...req, releases };
}

/** A scratch directory removed by the returned cleanup. */
export async function scratch(): Promise<{
  dir: string;
  write(name: string, text: string | Buffer): Promise<string>;
  cleanup(): Promise<void>;
}> {
  const dir = await mkdtemp(join(tmpdir(), "manent-k8s-test-"));
  return {
    dir,
    async write(name, text) {
      const p = join(dir, name);
      await writeFile(p, text);
      return p;
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The tutorial's dist/hello-1.0.0.yaml. */
export const helloManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
spec:
  replicas: \${REPLICAS}
  progressDeadlineSeconds: 120
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
        - name: hello
          image: hashicorp/http-echo:1.0
          args: ["-listen=:8080", "-text=hello from \${MANENT_VERSION} in \${MANENT_ENVIRONMENT}"]
          ports: [{containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /, port: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: hello
spec:
  selector: {app: hello}
  ports: [{port: 80, targetPort: 8080}]
`;

/**
 * The tutorial's sed: the 1.1.0 whose image does not exist, with the tutorial's 10 s progress
 * deadline or a shorter one (the real Deployment controller waits that long in real time).
 */
export function stuckManifest(progressDeadlineSeconds = 10): string {
  return helloManifest
    .replace("http-echo:1.0", "http-echo:does-not-exist")
    .replace("progressDeadlineSeconds: 120", `progressDeadlineSeconds: ${progressDeadlineSeconds}`);
}
