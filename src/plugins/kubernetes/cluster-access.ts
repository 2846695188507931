import { Code, ManentError } from "../../core/errors.js";
import { targetId, type Request, type Target } from "../../core/contract/index.js";
import { ClusterClient } from "./cluster-client.js";
import { labelValue, managedBy, type ReleaseContext } from "./labels.js";
import type { KubernetesParams } from "./params.js";

/** A cluster in the rollout state: host and port, as two clusters may share a host. */
export function clusterKey(t: Target): string {
  return `${t.host}:${t.port ?? 443}`;
}

/** The label selector of this application's objects in this environment. */
export function selectorOf(ctx: ReleaseContext): string {
  return `manent.io/application=${labelValue(ctx.application)},manent.io/environment=${labelValue(ctx.environment)}`;
}

export function contextOf(req: Request, params: KubernetesParams): ReleaseContext {
  return {
    tenant: req.tenant,
    application: req.application,
    environment: req.environment,
    artifact: req.artifact.name,
    version: req.artifact.version,
    namespace: params.namespace,
  };
}

/**
 * Runs `fn` with a client for cluster `t`, closing its connections afterwards. Each cluster may
 * have its own service account and CA: the target's labels `token_secret` / `ca_secret` name its
 * secrets, the params' are the default.
 */
export async function withClient<T>(req: Request, params: KubernetesParams, t: Target, fn: (c: ClusterClient) => Promise<T>): Promise<T> {
  const caSecret = t.labels.ca_secret ?? params.ca_secret;
  const tokenSecret = t.labels.token_secret ?? params.token_secret;
  const token = (await readSecret(req, tokenSecret, t.labels.token_secret ? "target label token_secret" : "param token_secret")).trim();
  if (token === "") {
    throw new ManentError(
      Code.FailedPrecondition,
      `kubernetes: cluster ${targetId(t)}: secret "${tokenSecret}" (the service account token) is empty: put the token Secret's token in it`,
      {
        details: { secret: tokenSecret },
      },
    );
  }
  const ca = caSecret ? await readSecret(req, caSecret, t.labels.ca_secret ? "target label ca_secret" : "param ca_secret") : undefined;
  const client = new ClusterClient(t, token, ca);
  try {
    return await fn(client);
  } catch (err) {
    if (err instanceof ManentError && err.code === Code.Unauthenticated) {
      // 401: the server knows no such token. A retry sends the same token.
      throw new ManentError(
        Code.Unauthenticated,
        `kubernetes: cluster ${targetId(t)}: the API server refused the token in secret "${tokenSecret}" (401 Unauthorized): it is wrong, expired, revoked or another cluster's`,
        {
          cause: err,
          details: { secret: tokenSecret },
        },
      );
    }
    throw err;
  } finally {
    client.close();
  }
}

/** A secret the params name; one the envconfig does not declare is a permanent error naming the param. */
async function readSecret(req: Request, name: string, by: string): Promise<string> {
  try {
    return await req.secrets.secret(name);
  } catch (err) {
    const e = ManentError.from(err);
    // Not declared (not_found) cannot change between two retries of the same deploy.
    const code = e.code === Code.NotFound ? Code.FailedPrecondition : e.code;
    throw new ManentError(
      code,
      `kubernetes: secret "${name}" (${by}): ${e.message}${e.code === Code.NotFound ? " (declare it under secrets: in the envconfig)" : ""}`,
      {
        cause: err,
        details: { ...e.details, secret: name },
      },
    );
  }
}

/** The labels that make an object manent's for this application and environment. */
export function ownerLabels(ctx: ReleaseContext): Record<string, string> {
  return {
    "app.kubernetes.io/managed-by": managedBy,
    "manent.io/application": labelValue(ctx.application),
    "manent.io/environment": labelValue(ctx.environment),
  };
}
