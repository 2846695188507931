import {
  DriftStatus,
  joinPath,
  type DriftChange,
  type IgnoredChange,
  type IgnoreRule,
  type PathSegment,
  type TargetDrift,
} from "../../core/contract/index.js";
import { objectError } from "./apply.js";
import { ignoredBecause, ignoredPaths, ReleaseIgnore, type ObjectIgnore } from "./ignore.js";
import type { ClusterClient } from "./cluster-client.js";
import { readIndex, readRelease } from "./history.js";
import { fieldManager, type ReleaseContext } from "./labels.js";
import { refOf, type KubeObject } from "./objects.js";

/** What the API server keeps on an object that no apply sets: never drift. */
const keptByServer = new Set([
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
 * `expected` is the version manent recorded; another release in service is drift too. What
 * `ignore` (the envconfig's drift.ignore, and an autoscaler's replicas) covers is reported apart, as ignored.
 */
export async function driftOn(
  client: ClusterClient,
  ctx: ReleaseContext,
  expected: string,
  ignore: readonly IgnoreRule[],
  signal: AbortSignal,
): Promise<Omit<TargetDrift, "host">> {
  const index = await readIndex(client, ctx, signal);
  const current = index.current;
  const live = current?.version ?? "";
  const changes: DriftChange[] = [];
  const ignored: IgnoredChange[] = [];
  if (live !== expected) changes.push({ object: "release", field: "version", expected, live });
  const details: Record<string, string> = { namespace: ctx.namespace };
  if (current) {
    details.release = current.configmap;
    const stored = await readRelease(client, ctx, current, signal);
    const release = new ReleaseIgnore(ignore, stored.objects);
    for (const obj of stored.objects) {
      const found = await objectDrift(client, obj, release.of(obj), signal);
      changes.push(...found.changes);
      ignored.push(...found.ignored);
    }
    details.objects_checked = String(stored.objects.length);
  }
  return {
    status: changes.length > 0 ? DriftStatus.Drifted : DriftStatus.InSync,
    version: live,
    changes,
    ...(ignored.length > 0 && { ignored }),
    details,
  };
}

async function objectDrift(
  client: ClusterClient,
  obj: KubeObject,
  ignore: ObjectIgnore | undefined,
  signal: AbortSignal,
): Promise<{ changes: DriftChange[]; ignored: IgnoredChange[] }> {
  const ref = refOf(obj);
  const name = `${obj.kind}/${obj.metadata.name}`;
  let live: KubeObject | undefined;
  let wanted: KubeObject;
  try {
    live = await client.get(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name, signal);
  } catch (err) {
    throw objectError(client, ref, "get", err);
  }
  if (!live) return { changes: [{ object: name, field: "", expected: "present", live: "" }], ignored: [] };
  try {
    wanted = await client.apply(obj, { manager: fieldManager, force: true, dryRun: true, signal });
  } catch (err) {
    throw objectError(client, ref, "patch (dry run)", err);
  }
  const changes: DriftChange[] = [];
  const ignored: IgnoredChange[] = [];
  const covered = ignore && ignoredPaths(ignore, live);
  // A Secret's values are never shown: that they differ is enough.
  const show = obj.kind === "Secret" && obj.apiVersion === "v1" ? () => "(secret value)" : shown;
  diff(wanted, live, "", [], (field, segments, a, b) => {
    const change = { object: name, field, expected: show(a), live: show(b) };
    const reason = covered && ignoredBecause(covered, segments);
    if (reason) ignored.push({ ...change, reason });
    else changes.push(change);
  });
  return { changes, ignored };
}

/** Calls `found` for each leaf where `a` and `b` differ (arrays element by element), by path (`spec.replicas`, `data.greeting`). */
function diff(
  a: unknown,
  b: unknown,
  path: string,
  segments: PathSegment[],
  found: (field: string, segments: PathSegment[], a: unknown, b: unknown) => void,
): void {
  if (keptByServer.has(path)) return;
  if (isRecord(a) && isRecord(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)]))
      diff(a[key], b[key], joinPath(path, key), [...segments, { key }], found);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) diff(a[i], b[i], `${path}[${i}]`, [...segments, { index: i }], found);
    return;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) found(path, segments, a, b);
}

function shown(v: unknown): string {
  if (v === undefined) return "";
  const text = typeof v === "string" ? v : JSON.stringify(v);
  return text.length > maxShown ? `${text.slice(0, maxShown)}…` : text;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
