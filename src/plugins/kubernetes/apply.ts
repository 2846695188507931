import { Code, ManentError } from "../../core/errors.js";
import type { ClusterClient } from "./cluster-client.js";
import { KubeApiError, missingPermission } from "./kube-api-error.js";
import { fieldManager } from "./labels.js";
import { describeRef, refOf, type KubeObject, type ObjectRef } from "./objects.js";

export interface ApplyOptions {
  dryRun: boolean;
  /** Take over fields other managers own (`force_conflicts`, rollbacks of manent's own objects). */
  force: boolean;
  signal: AbortSignal;
}

/** Objects applied at once; enough to hide latency, few enough not to flood the API server. */
const concurrency = 8;

/**
 * The error a failed request on one object becomes: it names the cluster and the object, and for
 * a 403 the permission the token lacks; conflicts and missing permissions are permanent.
 */
export function objectError(client: ClusterClient, ref: ObjectRef, action: string, err: unknown): ManentError {
  const where = `cluster ${client.target.host}: ${describeRef(ref)}`;
  if (!(err instanceof KubeApiError)) {
    const e = ManentError.from(err);
    return e.message.startsWith("cluster ") ? e : new ManentError(e.code, `${where}: ${action}: ${e.message}`, { cause: err, details: e.details });
  }
  if (err.status === 403) {
    const perm = missingPermission(err) ?? { verb: action, resource: ref.kind };
    return new ManentError(
      Code.PermissionDenied,
      `${where}: forbidden: the token lacks permission "${perm.verb}" on "${perm.resource}" in namespace "${ref.namespace ?? "(cluster)"}" (${err.body.message ?? "403"})`,
      { cause: err, details: { verb: perm.verb, resource: perm.resource, object: describeRef(ref) } },
    );
  }
  if (err.status === 409) {
    return new ManentError(
      Code.Aborted,
      `${where}: field manager conflict: ${err.body.message ?? "conflict"} (another field manager owns these fields; set param force_conflicts: "true" to take them over)`,
      { cause: err, details: { object: describeRef(ref) } },
    );
  }
  return new ManentError(err.code, `${where}: ${action}: ${err.body.message ?? `HTTP ${err.status}`}`, { cause: err, details: err.details });
}

/**
 * Server-side applies one object. A conflict on an object a Helm release owns (annotation
 * `meta.helm.sh/release-name`) is retried with force: that is how manent adopts a Helm release.
 */
export async function applyObject(client: ClusterClient, obj: KubeObject, opts: ApplyOptions): Promise<KubeObject> {
  try {
    return await client.apply(obj, { manager: fieldManager, force: opts.force, dryRun: opts.dryRun, signal: opts.signal });
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 409 && !opts.force) {
      const live = await client
        .get(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name, opts.signal)
        .catch((e: unknown) => {
          throw objectError(client, refOf(obj), "get", e);
        });
      if (live?.metadata.annotations?.["meta.helm.sh/release-name"] !== undefined) {
        try {
          return await client.apply(obj, { manager: fieldManager, force: true, dryRun: opts.dryRun, signal: opts.signal });
        } catch (err2) {
          throw objectError(client, refOf(obj), "patch", err2);
        }
      }
    }
    throw objectError(client, refOf(obj), "patch", err);
  }
}

/**
 * Applies objects in the given order, `concurrency` at a time within a run of the same kind (so
 * kinds still go in order). Stops at the first failure unless `collect` is set, in which case
 * every object is tried and all failures are returned (a dry-run reports every missing permission).
 */
export async function applyAll(client: ClusterClient, objs: KubeObject[], opts: ApplyOptions & { collect?: boolean }): Promise<ManentError[]> {
  const errors: ManentError[] = [];
  let i = 0;
  while (i < objs.length) {
    let j = i;
    while (j < objs.length && objs[j]!.kind === objs[i]!.kind) j++;
    const group = objs.slice(i, j);
    for (let k = 0; k < group.length; k += concurrency) {
      const settled = await Promise.allSettled(group.slice(k, k + concurrency).map((o) => applyObject(client, o, opts)));
      for (const s of settled) if (s.status === "rejected") errors.push(ManentError.from(s.reason));
      if (errors.length > 0 && !opts.collect) return errors;
    }
    i = j;
  }
  return errors;
}

/** Deletes objects (already gone is fine), in the given order. */
export async function deleteAll(client: ClusterClient, refs: ObjectRef[], signal: AbortSignal): Promise<number> {
  let deleted = 0;
  for (const ref of refs) {
    try {
      if (await client.delete(ref.apiVersion, ref.kind, ref.namespace, ref.name, signal)) deleted++;
    } catch (err) {
      throw objectError(client, ref, "delete", err);
    }
  }
  return deleted;
}
