import { DriftStatus, type DriftChange, type TargetDrift } from "../../core/contract/index.js";
import { objectError } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
import { readIndex, readRelease } from "./history.js";
import { fieldManager, type ReleaseContext } from "./labels.js";
import { refOf, type KubeObject } from "./objects.js";

/** What the API server keeps on an object that no apply sets: never drift. */
const ignoredPaths = new Set([
  "status",
  "metadata.managedFields",
  "metadata.resourceVersion",
  "metadata.generation",
  "metadata.uid",
  "metadata.creationTimestamp",
  "metadata.selfLink",
]);
/** A value longer than this is cut in what drift shows. */
const maxShown = 200;

/**
 * The objects of the release in service on one cluster against the live ones: each is applied as
 * a server-side dry run (manent's field manager, forced: what a deploy of that release would make
 * of the live object), and what differs between that and the live object is drift, field by field.
 * `expected` is the version manent recorded; another release in service is drift too.
 */
export async function driftOn(
  client: ClusterClient,
  ctx: ReleaseContext,
  expected: string,
  signal: AbortSignal,
): Promise<Omit<TargetDrift, "host">> {
  const index = await readIndex(client, ctx, signal);
  const current = index.current;
  const live = current?.version ?? "";
  const changes: DriftChange[] = [];
  if (live !== expected) changes.push({ object: "release", field: "version", expected, live });
  const details: Record<string, string> = { namespace: ctx.namespace };
  if (current) {
    details.release = current.configmap;
    const stored = await readRelease(client, ctx, current, signal);
    for (const obj of stored.objects) changes.push(...(await objectDrift(client, obj, signal)));
    details.objects_checked = String(stored.objects.length);
  }
  return { status: changes.length > 0 ? DriftStatus.Drifted : DriftStatus.InSync, version: live, changes, details };
}

async function objectDrift(client: ClusterClient, obj: KubeObject, signal: AbortSignal): Promise<DriftChange[]> {
  const ref = refOf(obj);
  const name = `${obj.kind}/${obj.metadata.name}`;
  let live: KubeObject | undefined;
  let wanted: KubeObject;
  try {
    live = await client.get(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name, signal);
  } catch (err) {
    throw objectError(client, ref, "get", err);
  }
  if (!live) return [{ object: name, field: "", expected: "present", live: "" }];
  try {
    wanted = await client.apply(obj, { manager: fieldManager, force: true, dryRun: true, signal });
  } catch (err) {
    throw objectError(client, ref, "patch (dry run)", err);
  }
  const changes: DriftChange[] = [];
  // A Secret's values are never shown: that they differ is enough.
  const show = obj.kind === "Secret" && obj.apiVersion === "v1" ? () => "(secret value)" : shown;
  diff(wanted, live, "", (field, a, b) => changes.push({ object: name, field, expected: show(a), live: show(b) }));
  return changes;
}

/** Calls `found` for each leaf where `a` and `b` differ (arrays element by element), by path (`spec.replicas`, `data.greeting`). */
function diff(a: unknown, b: unknown, path: string, found: (field: string, a: unknown, b: unknown) => void): void {
  if (ignoredPaths.has(path)) return;
  if (isRecord(a) && isRecord(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) diff(a[key], b[key], join(path, key), found);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) diff(a[i], b[i], `${path}[${i}]`, found);
    return;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) found(path, a, b);
}

function join(path: string, key: string): string {
  const part = /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? key : `[${JSON.stringify(key)}]`;
  if (part.startsWith("[")) return `${path}${part}`;
  return path === "" ? part : `${path}.${part}`;
}

function shown(v: unknown): string {
  if (v === undefined) return "";
  const text = typeof v === "string" ? v : JSON.stringify(v);
  return text.length > maxShown ? `${text.slice(0, maxShown)}…` : text;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
