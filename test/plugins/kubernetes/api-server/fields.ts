/**
 * Field ownership for server-side apply, simplified: an object's fields are its leaf paths through
 * maps; lists are atomic (owned and compared whole), where the real server merges lists of
 * containers by key. Enough for conflicts, co-ownership of equal values, force and removal of
 * fields a manager stops applying.
 */
export type FieldPath = string[];

const untracked = new Set(['["apiVersion"]', '["kind"]', '["metadata","name"]', '["metadata","namespace"]']);

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Leaf paths of an applied configuration (status and identity excluded), keyed by JSON path. */
export function leafPaths(obj: Record<string, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (v: unknown, path: FieldPath) => {
    if (isMap(v) && Object.keys(v).length > 0) {
      for (const [k, child] of Object.entries(v)) walk(child, [...path, k]);
      return;
    }
    const key = JSON.stringify(path);
    if (!untracked.has(key)) out.set(key, v);
  };
  for (const [k, v] of Object.entries(obj)) if (k !== "status") walk(v, [k]);
  return out;
}

export function getAt(obj: Record<string, unknown>, path: FieldPath): unknown {
  let cur: unknown = obj;
  for (const p of path) {
    if (!isMap(cur)) return undefined;
    cur = cur[p];
  }
  return cur;
}

export function setAt(obj: Record<string, unknown>, path: FieldPath, value: unknown): void {
  let cur = obj;
  for (const p of path.slice(0, -1)) {
    if (!isMap(cur[p])) cur[p] = {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[path[path.length - 1]!] = structuredClone(value);
}

/** Deletes a field and the maps it leaves empty. */
export function deleteAt(obj: Record<string, unknown>, path: FieldPath): void {
  const parents: Record<string, unknown>[] = [];
  let cur: unknown = obj;
  for (const p of path.slice(0, -1)) {
    if (!isMap(cur)) return;
    parents.push(cur);
    cur = cur[p];
  }
  if (!isMap(cur)) return;
  delete cur[path[path.length - 1]!];
  for (let i = path.length - 2; i >= 0; i--) {
    const parent = parents[i]!;
    const child = parent[path[i]!];
    if (isMap(child) && Object.keys(child).length === 0 && i > 0) delete parent[path[i]!];
    else break;
  }
}

export function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The `fieldsV1` form of a set of paths (`{"f:spec":{"f:replicas":{}}}`), as managedFields shows it. */
export function toFieldsV1(paths: Iterable<string>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const key of paths) {
    let cur = root;
    for (const p of JSON.parse(key) as FieldPath) {
      const k = `f:${p}`;
      cur[k] ??= {};
      cur = cur[k] as Record<string, unknown>;
    }
  }
  return root;
}

/** `.spec.replicas`: how conflict messages name a field. */
export function fieldName(key: string): string {
  return (JSON.parse(key) as FieldPath).map((p) => `.${p}`).join("");
}
