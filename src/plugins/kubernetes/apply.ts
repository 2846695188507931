import { Code, ManentError } from "../../core/errors.js";
import type { ClusterClient } from "./cluster-client.js";
import { isMissingNamespace, isUndeclaredField, KubeApiError, missingPermission } from "./kube-api-error.js";
import { fieldManager } from "./labels.js";
import { describeRef, refOf, type KubeObject, type ObjectRef } from "./objects.js";

export interface ApplyOptions {
  dryRun: boolean;
  /** Take over fields other managers own (`force_conflicts`, rollbacks of manent's own objects). */
  force: boolean;
  signal: AbortSignal;
}

/** Applies in flight at once; enough to hide latency, few enough not to flood the API server. */
const concurrency = 16;

/**
 * The error a failed request on one object becomes: it names the cluster and the object, and for
 * a 403 the permission the token lacks; conflicts and missing permissions are permanent.
 */
export function objectError(client: ClusterClient, ref: ObjectRef, action: string, err: unknown): ManentError {
  const where = `cluster ${client.name}: ${describeRef(ref)}`;
  if (!(err instanceof KubeApiError)) {
    const e = ManentError.from(err);
    return e.message.startsWith("cluster ")
      ? e
      : new ManentError(e.code, `${where}: ${action}: ${e.message}`, { cause: err, details: e.details });
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
  if (err.status === 404 && isMissingNamespace(err.body)) {
    return new ManentError(
      err.code,
      `${where}: namespace "${err.body.details?.name ?? ref.namespace ?? ""}" does not exist: create it (with the service account's Role, as in the tutorial) or set param namespace to an existing one`,
      { cause: err, details: { ...err.details, object: describeRef(ref), namespace: err.body.details?.name ?? ref.namespace ?? "" } },
    );
  }
  if (isUndeclaredField(err)) {
    return new ManentError(
      err.code,
      `${where}: the API server refused a field its schema does not declare (a typo, or a field of another apiVersion): ${err.body.message ?? ""}`,
      { cause: err, details: { ...err.details, object: describeRef(ref) } },
    );
  }
  return new ManentError(err.code, `${where}: ${action}: ${err.body.message ?? `HTTP ${err.status}`}`, {
    cause: err,
    details: err.details,
  });
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
 * Applies objects in the given order, up to `concurrency` requests in flight within a run of the
 * same kind (so kinds still go in order: a run starts when the previous one has been answered).
 * Stops starting new ones at the first failure unless `collect` is set, in which case every object
 * is tried and all failures are returned (a dry-run reports every missing permission).
 */
export async function applyAll(
  client: ClusterClient,
  objs: KubeObject[],
  opts: ApplyOptions & { collect?: boolean },
): Promise<ManentError[]> {
  const errors: ManentError[] = [];
  let i = 0;
  while (i < objs.length) {
    let j = i;
    while (j < objs.length && objs[j]!.kind === objs[i]!.kind) j++;
    const group = objs.slice(i, j);
    // A pool, not batches: one slow answer does not hold the other requests back. Failures are
    // reported in object order, whichever answer came first.
    const failed: (ManentError | undefined)[] = [];
    let next = 0;
    let stop = false;
    const worker = async (): Promise<void> => {
      while (next < group.length && !stop) {
        const at = next++;
        try {
          await applyObject(client, group[at]!, opts);
        } catch (err) {
          failed[at] = ManentError.from(err);
          stop = !opts.collect;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, group.length) }, worker));
    for (const e of failed) if (e) errors.push(e);
    if (errors.length > 0 && !opts.collect) return errors;
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

/** A `metadata.managedFields` entry, as the API server returns it. */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  fieldsV1?: FieldSet;
}
export type FieldSet = { [key: string]: FieldSet };

/**
 * Applies an object without taking fields over: a field another manager owns stays theirs. A
 * conflict (409) is answered by dropping, from what manent applies, every field the live object's
 * other managers own, and applying the rest. Used by rollbacks: a rollback restores what manent
 * changed and leaves what someone else changed (a `kubectl scale`, an HPA) as it found it.
 */
export async function applyYielding(client: ClusterClient, obj: KubeObject, signal: AbortSignal): Promise<KubeObject> {
  try {
    return await client.apply(obj, { manager: fieldManager, force: false, dryRun: false, signal });
  } catch (err) {
    if (!(err instanceof KubeApiError && err.status === 409)) throw objectError(client, refOf(obj), "patch", err);
  }
  let live: KubeObject | undefined;
  try {
    live = await client.get(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name, signal);
  } catch (err) {
    throw objectError(client, refOf(obj), "get", err);
  }
  // Every other manager, also through a subresource: `kubectl scale` owns .spec.replicas via "scale".
  const yielded = live ? withoutFieldsOf(obj, live, (manager) => manager !== fieldManager) : obj;
  try {
    return await client.apply(yielded, { manager: fieldManager, force: false, dryRun: false, signal });
  } catch (err) {
    throw objectError(client, refOf(obj), "patch", err);
  }
}

/** A copy of `obj` without the fields that the managers `pick` chooses own on the live object. */
export function withoutFieldsOf(obj: KubeObject, live: KubeObject, pick: (manager: string | undefined) => boolean): KubeObject {
  const out = structuredClone(obj);
  for (const entry of (live.metadata.managedFields ?? []) as ManagedFieldsEntry[]) {
    if (!pick(entry.manager) || !entry.fieldsV1) continue;
    stripFields(out as unknown as Record<string, unknown>, entry.fieldsV1, true);
  }
  return out;
}

/**
 * Removes from `value` the fields a FieldsV1 set names (`f:name`, `k:{"name":"x"}` list items by
 * key, `v:` set members, `i:` indexes). The object's identity (apiVersion, kind, metadata.name and
 * namespace) and the key fields of list items are kept; a map or list left empty is removed.
 */
function stripFields(value: Record<string, unknown>, set: FieldSet, root: boolean, keep: ReadonlySet<string> = new Set()): void {
  for (const [key, sub] of Object.entries(set)) {
    if (!key.startsWith("f:")) continue;
    const name = key.slice(2);
    if (keep.has(name) || (root && (name === "apiVersion" || name === "kind"))) continue;
    if (!(name in value)) continue;
    const child = value[name];
    const leaf = Object.keys(sub).every((k) => k === ".");
    if (root && name === "metadata" && child && typeof child === "object") {
      stripFields(child as Record<string, unknown>, sub, false, new Set(["name", "namespace"]));
      continue;
    }
    if (leaf) {
      delete value[name];
    } else if (Array.isArray(child)) {
      stripListItems(child, sub);
      if (child.length === 0) delete value[name];
    } else if (child && typeof child === "object") {
      stripFields(child as Record<string, unknown>, sub, false);
      if (Object.keys(child).length === 0) delete value[name];
    }
  }
}

function stripListItems(list: unknown[], set: FieldSet): void {
  for (const [key, sub] of Object.entries(set)) {
    const leaf = Object.keys(sub).every((k) => k === ".");
    let match: (item: unknown, i: number) => boolean;
    let keyFields = new Set<string>();
    if (key.startsWith("k:")) {
      const k = JSON.parse(key.slice(2)) as Record<string, unknown>;
      keyFields = new Set(Object.keys(k));
      match = (item) =>
        !!item &&
        typeof item === "object" &&
        Object.entries(k).every(([f, v]) => JSON.stringify((item as Record<string, unknown>)[f]) === JSON.stringify(v));
    } else if (key.startsWith("v:")) {
      const v = key.slice(2);
      match = (item) => JSON.stringify(item) === v;
    } else if (key.startsWith("i:")) {
      const at = Number(key.slice(2));
      match = (_item, i) => i === at;
    } else continue;
    for (let i = list.length - 1; i >= 0; i--) {
      const item = list[i];
      if (!match(item, i)) continue;
      if (leaf || !item || typeof item !== "object") list.splice(i, 1);
      else stripFields(item as Record<string, unknown>, sub, false, keyFields);
    }
  }
}

/**
 * Deletes the objects among `refs` that are still manent's for this application and environment
 * (its labels say so), in the given order; one that another owner made, or took over, is left. A
 * deploy refused before it changed an object (a conflict) must not delete that object on rollback.
 */
export async function deleteOwned(
  client: ClusterClient,
  refs: ObjectRef[],
  owner: Record<string, string>,
  signal: AbortSignal,
): Promise<{ deleted: number; kept: ObjectRef[] }> {
  let deleted = 0;
  const kept: ObjectRef[] = [];
  for (const ref of refs) {
    let live: KubeObject | undefined;
    try {
      live = await client.get(ref.apiVersion, ref.kind, ref.namespace, ref.name, signal);
    } catch (err) {
      throw objectError(client, ref, "get", err);
    }
    if (!live) continue;
    const labels = live.metadata.labels ?? {};
    if (!Object.entries(owner).every(([k, v]) => labels[k] === v)) {
      kept.push(ref);
      continue;
    }
    try {
      if (await client.delete(ref.apiVersion, ref.kind, ref.namespace, ref.name, signal)) deleted++;
    } catch (err) {
      throw objectError(client, ref, "delete", err);
    }
  }
  return { deleted, kept };
}
