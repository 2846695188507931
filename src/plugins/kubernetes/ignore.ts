import { parseFieldPath, pathCovers, type IgnoreRule, type PathSegment } from "../../core/contract/index.js";
import { objectError, withoutFieldsOf, type FieldSet, type ManagedFieldsEntry } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
import { refKey, refOf, type KubeObject } from "./objects.js";

/** A path (or every path under it) drift does not count and a deploy leaves as it is live, and why. */
interface IgnoredPath {
  path: PathSegment[];
  reason: string;
}

/** What `drift.ignore` (and an autoscaler of the release) leaves to others on one object. */
export interface ObjectIgnore {
  paths: IgnoredPath[];
  managers: { name: string; reason: string }[];
}

const replicas: PathSegment[] = [{ key: "spec" }, { key: "replicas" }];

/**
 * The ignore list for the objects of one release: the envconfig's rules, and `spec.replicas` of
 * every object a HorizontalPodAutoscaler of the release scales (the autoscaler owns it: a deploy
 * or a heal that set it back would fight it, and what it sets is never drift).
 */
export class ReleaseIgnore {
  private readonly rules: { rule: IgnoreRule; paths: PathSegment[][]; reason: string }[];
  private readonly scaled = new Map<string, string>();

  constructor(rules: readonly IgnoreRule[], objects: readonly KubeObject[]) {
    // The envconfig was validated when the deploy was resolved: every path parses.
    this.rules = rules.map((rule, i) => ({ rule, paths: rule.fields.map(parseFieldPath), reason: `drift.ignore.${i}` }));
    for (const o of objects) {
      if (o.kind !== "HorizontalPodAutoscaler" || !o.apiVersion.startsWith("autoscaling/")) continue;
      const ref = (o.spec as { scaleTargetRef?: { apiVersion?: string; kind?: string; name?: string } } | undefined)?.scaleTargetRef;
      if (!ref?.kind || !ref.name) continue;
      const key = refKey({
        apiVersion: ref.apiVersion ?? "",
        kind: ref.kind,
        name: ref.name,
        ...(o.metadata.namespace && { namespace: o.metadata.namespace }),
      });
      this.scaled.set(key, `HorizontalPodAutoscaler/${o.metadata.name}`);
    }
  }

  /** What is ignored on `obj`; undefined when nothing is. */
  of(obj: KubeObject): ObjectIgnore | undefined {
    const out: ObjectIgnore = { paths: [], managers: [] };
    const hpa = this.scaled.get(refKey(refOf(obj)));
    if (hpa) out.paths.push({ path: replicas, reason: hpa });
    for (const { rule, paths, reason } of this.rules) {
      if (!matches(rule, obj)) continue;
      for (const path of paths) out.paths.push({ path, reason });
      for (const name of rule.managers) out.managers.push({ name, reason: `manager ${name} (${reason})` });
    }
    return out.paths.length > 0 || out.managers.length > 0 ? out : undefined;
  }
}

function matches(rule: IgnoreRule, obj: KubeObject): boolean {
  if (rule.kind !== "*" && rule.kind !== obj.kind) return false;
  if (rule.group !== undefined && rule.group !== groupOf(obj.apiVersion)) return false;
  if (rule.name !== undefined && rule.name !== obj.metadata.name) return false;
  return rule.namespace === undefined || rule.namespace === obj.metadata.namespace;
}

function groupOf(apiVersion: string): string {
  return apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
}

/**
 * The concrete paths of the live object that `ignore` covers: its paths, and the fields its
 * managers own there (`metadata.managedFields`). A list item a manager added is covered as a whole.
 */
export function ignoredPaths(ignore: ObjectIgnore, live: KubeObject): { paths: IgnoredPath[]; items: IgnoredPath[] } {
  const paths = [...ignore.paths];
  const items: IgnoredPath[] = [];
  for (const entry of (live.metadata.managedFields ?? []) as ManagedFieldsEntry[]) {
    const m = ignore.managers.find((x) => x.name === entry.manager);
    if (!m || !entry.fieldsV1) continue;
    ownedPaths(entry.fieldsV1, live, [], (path, item) => (item ? items : paths).push({ path, reason: m.reason }));
  }
  return { paths, items };
}

/** Why a difference at `path` is not drift, or undefined when it is. */
export function ignoredBecause(covered: { paths: IgnoredPath[]; items: IgnoredPath[] }, path: PathSegment[]): string | undefined {
  return (
    covered.paths.find((p) => pathCovers(p.path, path))?.reason ??
    covered.items.find((p) => p.path.length === path.length && pathCovers(p.path, path))?.reason
  );
}

/** Calls `found` for each leaf a FieldsV1 set owns in `value` (list items resolved to their index), `item` for a list item owned as a whole. */
function ownedPaths(set: FieldSet, value: unknown, prefix: PathSegment[], found: (path: PathSegment[], item: boolean) => void): void {
  for (const [key, sub] of Object.entries(set)) {
    const leaf = Object.keys(sub).every((k) => k === ".");
    if (key.startsWith("f:")) {
      const name = key.slice(2);
      const path = [...prefix, { key: name }];
      if (leaf) found(path, false);
      else ownedPaths(sub, isRecord(value) ? value[name] : undefined, path, found);
      continue;
    }
    if (!Array.isArray(value)) continue;
    for (const i of listItems(value, key)) {
      const path = [...prefix, { index: i }];
      if (leaf) found(path, false);
      else {
        if ("." in sub) found(path, true);
        ownedPaths(sub, value[i], path, found);
      }
    }
  }
}

/** The indexes of `list` a FieldsV1 list key names: `k:{"name":"x"}` by key fields, `v:"x"` by value, `i:0` by index. */
function listItems(list: unknown[], key: string): number[] {
  const out: number[] = [];
  if (key.startsWith("k:")) {
    const k = JSON.parse(key.slice(2)) as Record<string, unknown>;
    list.forEach((item, i) => {
      if (isRecord(item) && Object.entries(k).every(([f, v]) => JSON.stringify(item[f]) === JSON.stringify(v))) out.push(i);
    });
  } else if (key.startsWith("v:")) {
    const v = key.slice(2);
    list.forEach((item, i) => {
      if (JSON.stringify(item) === v) out.push(i);
    });
  } else if (key.startsWith("i:")) {
    const at = Number(key.slice(2));
    if (at < list.length) out.push(at);
  }
  return out;
}

/**
 * What a deploy applies of `objects` when something on them is ignored: for an object that exists,
 * each ignored path takes the live value (absent live: left out), and the fields an ignored
 * manager owns are left out, so the apply neither changes them nor, where manent owned them alone,
 * drops them (a field manent stops applying and no one else owns is deleted). An object that does
 * not exist yet is applied as the release has it. Needs `get` on those objects, as drift does.
 */
export async function keepIgnored(
  client: ClusterClient,
  objects: KubeObject[],
  rules: readonly IgnoreRule[],
  signal: AbortSignal,
): Promise<KubeObject[]> {
  const release = new ReleaseIgnore(rules, objects);
  return Promise.all(
    objects.map(async (obj) => {
      const ignore = release.of(obj);
      if (!ignore) return obj;
      let live: KubeObject | undefined;
      try {
        live = await client.get(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name, signal);
      } catch (err) {
        throw objectError(client, refOf(obj), "get", err);
      }
      if (!live) return obj;
      const names = new Set(ignore.managers.map((m) => m.name));
      let out =
        names.size > 0 ? withoutFieldsOf(obj, live, (manager) => manager !== undefined && names.has(manager)) : structuredClone(obj);
      for (const { path } of ignore.paths) out = takeLive(out, live, path);
      return out;
    }),
  );
}

/** `obj` with every path `pattern` names set to the live object's value there (removed where live has none). */
function takeLive(obj: KubeObject, live: KubeObject, pattern: PathSegment[]): KubeObject {
  const root = obj as unknown as Record<string, unknown>;
  const concrete = new Map<string, PathSegment[]>();
  for (const p of [...expand(live, pattern, []), ...expand(obj, pattern, [])]) concrete.set(JSON.stringify(p), p);
  for (const path of concrete.values()) {
    if (touchesIdentity(path)) continue;
    const value = valueAt(live, path);
    if (value === undefined) removeAt(root, path);
    else setAt(root, path, structuredClone(value));
  }
  return obj;
}

/** The object's identity (apiVersion, kind, metadata.name and namespace) is never taken from the live object. */
function touchesIdentity(path: PathSegment[]): boolean {
  const [first, second] = path.map((s) => ("key" in s ? s.key : undefined));
  if (path.length === 0 || first === "apiVersion" || first === "kind") return true;
  return first === "metadata" && (path.length === 1 || (path.length === 2 && (second === "name" || second === "namespace")));
}

/** The concrete paths in `value` a pattern names (`[*]` expanded over what is there). */
function expand(value: unknown, pattern: PathSegment[], prefix: PathSegment[]): PathSegment[][] {
  if (pattern.length === 0) return [prefix];
  const [head, ...rest] = pattern as [PathSegment, ...PathSegment[]];
  if ("any" in head) {
    if (Array.isArray(value)) return value.flatMap((v, i) => expand(v, rest, [...prefix, { index: i }]));
    if (isRecord(value)) return Object.entries(value).flatMap(([k, v]) => expand(v, rest, [...prefix, { key: k }]));
    return [];
  }
  if (rest.length === 0) return [[...prefix, head]];
  const child = "key" in head ? (isRecord(value) ? value[head.key] : undefined) : Array.isArray(value) ? value[head.index] : undefined;
  return child === undefined ? [] : expand(child, rest, [...prefix, head]);
}

function valueAt(value: unknown, path: PathSegment[]): unknown {
  let v = value;
  for (const s of path) {
    if ("key" in s) v = isRecord(v) ? v[s.key] : undefined;
    else if ("index" in s) v = Array.isArray(v) ? v[s.index] : undefined;
    if (v === undefined) return undefined;
  }
  return v;
}

/** Sets a value, making the maps on the way; an index the object's list does not have is left alone (lists are not padded). */
function setAt(root: Record<string, unknown>, path: PathSegment[], value: unknown): void {
  let v: unknown = root;
  for (const [i, s] of path.entries()) {
    const last = i === path.length - 1;
    if ("key" in s) {
      if (!isRecord(v)) return;
      if (last) v[s.key] = value;
      else {
        if (v[s.key] === undefined) {
          // A list is never made up: an index it does not have is left alone.
          if (!("key" in path[i + 1]!)) return;
          v[s.key] = {};
        }
        v = v[s.key];
      }
    } else if ("index" in s) {
      if (!Array.isArray(v) || s.index >= v.length) return;
      if (last) v[s.index] = value;
      else v = v[s.index];
    }
  }
}

function removeAt(root: Record<string, unknown>, path: PathSegment[]): void {
  const parent = valueAt(root, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if ("key" in last && isRecord(parent)) delete parent[last.key];
  else if ("index" in last && Array.isArray(parent) && last.index < parent.length) parent.splice(last.index, 1);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
