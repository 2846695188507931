import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger, Request, RollbackRequest, SecretsAccessor, TargetRelease } from "../../../src/plugin.js";
import { Code, ManentError } from "../../../src/plugin.js";
import type { TestApiServer } from "./api-server/index.js";

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
  const at = (level: string) => (msg: string, attrs?: Record<string, unknown>) => void lines.push({ level, msg, ...(attrs ? { attrs } : {}) });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

export interface RequestInput {
  clusters: TestApiServer[];
  artifactPath: string;
  version: string;
  params?: Record<string, string>;
  /** token secret value per cluster index; defaults to "tok-manent". */
  token?: string;
  application?: string;
  environment?: string;
  artifactName?: string;
  parallelism?: number;
}

/**
 * A Request as the engine builds it for the tutorial's environment: one target per cluster, the
 * token and CA as secrets. With several clusters each gets its own CA secret name… but the plugin
 * takes one `ca_secret`, so the clusters here share one CA bundle (all their CAs concatenated).
 */
export function makeRequest(input: RequestInput): Request {
  const ca = input.clusters.map((c) => c.caPem).join("\n");
  return {
    deploymentId: `dep-${input.version}`,
    tenant: "untenanted",
    application: input.application ?? "hello",
    environment: input.environment ?? "test",
    artifact: { type: "kubernetes", name: input.artifactName ?? "hello", version: input.version, source: input.artifactPath, path: input.artifactPath },
    targets: input.clusters.map((c) => ({ host: c.host, port: c.port, labels: {} })),
    params: { namespace: "hello", token_secret: "kube-token", ca_secret: "kube-ca", wait_timeout: "30s", ...input.params },
    secrets: secretsOf({ "kube-token": `${input.token ?? "tok-manent"}\n`, "kube-ca": ca }),
    parallelism: input.parallelism ?? 1,
    logger: memoryLogger(),
    signal: new AbortController().signal,
  };
}

export function rollbackRequest(req: Request, releases: TargetRelease[]): RollbackRequest {
  return { ...req, releases };
}

/** A scratch directory removed by the returned cleanup. */
export async function scratch(): Promise<{ dir: string; write(name: string, text: string | Buffer): Promise<string>; cleanup(): Promise<void> }> {
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

/** The tutorial's sed: the 1.1.0 whose image does not exist. */
export function stuckManifest(): string {
  return helloManifest.replace("http-echo:1.0", "http-echo:does-not-exist").replace("progressDeadlineSeconds: 120", "progressDeadlineSeconds: 30");
}
