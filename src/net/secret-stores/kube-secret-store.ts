import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { V1Secret } from "@kubernetes/client-node";
import { readSecretRef } from "../../core/config/secret-ref.js";
import type { KubeStoreConfig } from "../../core/config/secret-stores-config.js";
import { formatDeploySecretRef, type KubeSecretRef } from "../../core/config/store-secret-ref.js";
import { Code, ManentError } from "../../core/errors.js";
import { transportFailure } from "./transport-failure.js";

const field = "secret_stores.kubernetes";

/**
 * Reads keys of Kubernetes Secrets through the API server, with a service account token and the
 * cluster's CA as the kubernetes plugin reaches its clusters (client-node's KubeConfig built in
 * memory: no kubeconfig file, no kubectl). The token is read at each read, so a projected,
 * rotated token file is used as it changes; nothing read is kept.
 */
export class KubeSecretStore {
  private closed = false;

  private constructor(
    private readonly config: KubeStoreConfig,
    private readonly ca: string | undefined,
  ) {}

  static async open(config: KubeStoreConfig, configFile: string, baseDir: string): Promise<KubeSecretStore> {
    let ca: string | undefined;
    if (config.ca_file !== undefined) {
      const path = resolve(baseDir, config.ca_file);
      const refuse = (why: string) =>
        new ManentError(Code.InvalidArgument, `${configFile}: ${field}.ca_file: ${why}`, {
          details: { file: configFile, field: `${field}.ca_file` },
        });
      ca = await readFile(path, "utf8").catch((err: NodeJS.ErrnoException) => {
        throw refuse(`cannot read ${path}: ${err.code ?? err.message}`);
      });
      if (!ca.includes("-----BEGIN CERTIFICATE-----")) throw refuse(`${path} holds no PEM certificate`);
    }
    return new KubeSecretStore(config, ca);
  }

  async read(ref: KubeSecretRef): Promise<string> {
    const shown = formatDeploySecretRef(ref);
    if (this.closed) throw new ManentError(Code.Unavailable, `${shown}: the Kubernetes store is closed (the server is stopping)`);
    const token = (
      await readSecretRef(`${field}.token`, this.config.token).catch((err: unknown) => {
        throw new ManentError(Code.FailedPrecondition, `${shown}: ${ManentError.from(err).message}`, { details: { ref: shown } });
      })
    ).trim();
    // Imported on first use: client-node costs a server start most of a second, and most servers read no k8s: reference.
    const { CoreV1Api, KubeConfig } = await import("@kubernetes/client-node");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: "store",
          server: this.config.server,
          ...(this.ca && { caData: Buffer.from(this.ca).toString("base64") }),
          skipTLSVerify: false,
        },
      ],
      users: [{ name: "manent", token }],
      contexts: [{ name: "manent", cluster: "store", user: "manent" }],
      currentContext: "manent",
    });
    const secret = await this.withTimeout(
      kc.makeApiClient(CoreV1Api).readNamespacedSecret({ name: ref.name, namespace: ref.namespace }),
      shown,
    ).catch((err: unknown) => {
      throw this.failure(err, ref, shown);
    });
    return valueOf(secret, ref, shown);
  }

  close(): void {
    this.closed = true;
  }

  private withTimeout<T>(p: Promise<T>, shown: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new ManentError(Code.Unavailable, `${shown}: the Kubernetes API server gave no answer within ${this.config.timeout / 1000}s`, {
              details: { ref: shown },
            }),
          ),
        this.config.timeout,
      );
    });
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
  }

  /** What went wrong, by the API server's status; never its body (nor anything of the request). */
  private failure(err: unknown, ref: KubeSecretRef, shown: string): ManentError {
    if (err instanceof ManentError) return err;
    const details = { ref: shown };
    const status = (err as { code?: unknown }).code;
    if (typeof status !== "number")
      return transportFailure(err, shown, `the Kubernetes API server at ${this.config.server}`, this.config.timeout, `${field}.ca_file`);
    if (status === 404)
      return new ManentError(Code.FailedPrecondition, `${shown}: there is no Secret ${ref.name} in namespace ${ref.namespace} (404)`, {
        details,
      });
    if (status === 403)
      return new ManentError(
        Code.PermissionDenied,
        `${shown}: the API server refused to read Secret ${ref.namespace}/${ref.name} (403: the service account of ${field}.token may not get it)`,
        { details },
      );
    if (status === 401)
      return new ManentError(
        Code.Unauthenticated,
        `${shown}: the API server refused the token of ${field}.token (401): it is wrong, expired or revoked`,
        {
          details,
        },
      );
    const retryable = status >= 500 || status === 429;
    return new ManentError(
      retryable ? Code.Unavailable : Code.FailedPrecondition,
      `${shown}: the Kubernetes API server answered ${status}`,
      {
        details: { ...details, status: String(status) },
      },
    );
  }
}

function valueOf(secret: V1Secret, ref: KubeSecretRef, shown: string): string {
  if (secret.data && Object.hasOwn(secret.data, ref.key)) return Buffer.from(secret.data[ref.key]!, "base64").toString("utf8");
  if (secret.stringData && Object.hasOwn(secret.stringData, ref.key)) return secret.stringData[ref.key]!;
  throw new ManentError(Code.FailedPrecondition, `${shown}: Secret ${ref.namespace}/${ref.name} has no key "${ref.key}"`, {
    details: { ref: shown },
  });
}
