import { randomUUID } from "node:crypto";
import { generationKinds, qualifiedName, type ResourceInfo } from "./catalogue.js";
import { deleteAt, fieldName, getAt, leafPaths, sameValue, setAt, toFieldsV1 } from "./fields.js";
import { failure } from "./status.js";

type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };

interface Stored {
  obj: Obj;
  /** Field manager → owned leaf paths and how it last wrote them. */
  owners: Map<string, { paths: Set<string>; operation: "Apply" | "Update"; apiVersion: string; time: string }>;
}

export interface Change {
  res: ResourceInfo;
  obj: Obj;
  /** True when `metadata.generation` moved (a spec change the controllers react to). */
  generationChanged: boolean;
}

/** The objects the test server holds, with server-side apply field ownership. */
export class ObjectStore {
  private readonly objects = new Map<string, Stored>();
  private rv = 1000;

  constructor(private readonly onChange: (c: Change) => void) {}

  private key(res: ResourceInfo, ns: string | undefined, name: string): string {
    return `${res.group}|${res.name}|${ns ?? ""}|${name}`;
  }

  nextResourceVersion(): string {
    return String(++this.rv);
  }

  get(res: ResourceInfo, ns: string | undefined, name: string): Obj | undefined {
    const s = this.objects.get(this.key(res, ns, name));
    return s ? this.render(s) : undefined;
  }

  list(res: ResourceInfo, ns: string | undefined): Obj[] {
    const prefix = `${res.group}|${res.name}|`;
    const out: Obj[] = [];
    for (const [k, s] of this.objects) {
      if (!k.startsWith(prefix)) continue;
      if (ns !== undefined && res.namespaced && s.obj.metadata.namespace !== ns) continue;
      out.push(this.render(s));
    }
    return out.sort((a, b) => String(a.metadata.name).localeCompare(String(b.metadata.name)));
  }

  currentResourceVersion(): string {
    return String(this.rv);
  }

  /** The object with its managedFields, as the server returns it. */
  private render(s: Stored): Obj {
    const obj = structuredClone(s.obj);
    obj.metadata.managedFields = [...s.owners.entries()].map(([manager, o]) => ({
      manager,
      operation: o.operation,
      apiVersion: o.apiVersion,
      time: o.time,
      fieldsType: "FieldsV1",
      fieldsV1: toFieldsV1(o.paths),
    }));
    return obj;
  }

  /**
   * Server-side apply. Fields another manager owns with a different value conflict (409) unless
   * `force`, which takes them over. Fields this manager applied before and no longer applies are
   * removed unless someone else owns them too.
   */
  apply(res: ResourceInfo, ns: string | undefined, config: Obj, manager: string, force: boolean, dryRun: boolean): { obj: Obj; created: boolean } {
    const name = String(config.metadata.name);
    const key = this.key(res, ns, name);
    const existing = this.objects.get(key);
    const applied = leafPaths(config);
    const time = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const owners = new Map(existing ? [...existing.owners].map(([m, o]) => [m, { ...o, paths: new Set(o.paths) }]) : []);
    const base: Obj = existing ? structuredClone(existing.obj) : { apiVersion: config.apiVersion, kind: config.kind, metadata: { name } };

    const conflicts: { manager: string; field: string; apiVersion: string }[] = [];
    for (const [other, o] of owners) {
      if (other === manager) continue;
      for (const path of o.paths) {
        if (applied.has(path) && !sameValue(getAt(base, JSON.parse(path) as string[]), applied.get(path))) {
          conflicts.push({ manager: other, field: path, apiVersion: o.apiVersion });
        }
      }
    }
    if (conflicts.length > 0 && !force) {
      const lines = conflicts.map((c) => `conflict with "${c.manager}" using ${c.apiVersion}: ${fieldName(c.field)}`);
      throw failure(
        409,
        "Conflict",
        conflicts.length === 1 ? `Apply failed with 1 conflict: ${lines[0]}` : `Apply failed with ${conflicts.length} conflicts: ${lines.join("\n")}`,
        {
          name,
          group: res.group,
          kind: res.name,
          causes: conflicts.map((c) => ({ reason: "FieldManagerConflict", message: `conflict with "${c.manager}" using ${c.apiVersion}`, field: fieldName(c.field) })),
        },
      );
    }
    for (const c of conflicts) owners.get(c.manager)!.paths.delete(c.field);

    const mine = owners.get(manager);
    const next = structuredClone(base);
    if (mine) {
      for (const path of mine.paths) {
        if (applied.has(path)) continue;
        const ownedElsewhere = [...owners].some(([m, o]) => m !== manager && o.paths.has(path));
        if (!ownedElsewhere) deleteAt(next, JSON.parse(path) as string[]);
      }
    }
    for (const [path, value] of applied) setAt(next, JSON.parse(path) as string[], value);
    owners.set(manager, { paths: new Set(applied.keys()), operation: "Apply", apiVersion: String(config.apiVersion), time });
    for (const [m, o] of owners) if (o.paths.size === 0) owners.delete(m);

    return this.commit(res, ns, key, existing, next, owners, dryRun);
  }

  /** A JSON merge patch (RFC 7386) by a non-apply manager (`kubectl edit`, a controller). */
  mergePatch(res: ResourceInfo, ns: string | undefined, name: string, patch: Record<string, unknown>, manager: string, dryRun: boolean): Obj {
    const key = this.key(res, ns, name);
    const existing = this.objects.get(key);
    if (!existing) throw failure(404, "NotFound", `${qualifiedName(res)} "${name}" not found`, { name, group: res.group, kind: res.name });
    const next = mergeInto(structuredClone(existing.obj), patch) as Obj;
    const owners = new Map([...existing.owners].map(([m, o]) => [m, { ...o, paths: new Set(o.paths) }]));
    const changed = leafPaths(patch);
    for (const [, o] of owners) for (const p of changed.keys()) o.paths.delete(p);
    const time = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    owners.set(manager, { paths: new Set(changed.keys()), operation: "Update", apiVersion: String(existing.obj.apiVersion), time });
    return this.commit(res, ns, key, existing, next, owners, dryRun).obj;
  }

  private commit(res: ResourceInfo, ns: string | undefined, key: string, existing: Stored | undefined, next: Obj, owners: Stored["owners"], dryRun: boolean): { obj: Obj; created: boolean } {
    const meta = next.metadata;
    let generationChanged = false;
    if (!existing) {
      meta.uid = randomUUID();
      meta.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      if (res.namespaced) meta.namespace = ns;
      if (generationKinds.has(res.kind)) {
        meta.generation = 1;
        generationChanged = true;
      }
    } else if (generationKinds.has(res.kind) && !sameValue(specOf(existing.obj), specOf(next))) {
      meta.generation = Number(existing.obj.metadata.generation ?? 0) + 1;
      generationChanged = true;
    }
    const changed = !existing || !sameValue(existing.obj, next) || !sameOwners(existing.owners, owners);
    if (changed) meta.resourceVersion = dryRun ? String(this.rv + 1) : this.nextResourceVersion();
    const stored: Stored = { obj: next, owners };
    if (!dryRun) {
      this.objects.set(key, stored);
      if (changed) this.onChange({ res, obj: structuredClone(next), generationChanged });
    }
    return { obj: this.render(stored), created: !existing };
  }

  /** Replaces `status` (the controllers' write); false when the object is gone. */
  updateStatus(res: ResourceInfo, ns: string | undefined, name: string, status: Record<string, unknown>): boolean {
    const s = this.objects.get(this.key(res, ns, name));
    if (!s) return false;
    s.obj.status = status;
    s.obj.metadata.resourceVersion = this.nextResourceVersion();
    return true;
  }

  delete(res: ResourceInfo, ns: string | undefined, name: string, dryRun: boolean): Obj {
    const key = this.key(res, ns, name);
    const s = this.objects.get(key);
    if (!s) throw failure(404, "NotFound", `${qualifiedName(res)} "${name}" not found`, { name, group: res.group, kind: res.name });
    if (!dryRun) this.objects.delete(key);
    return s.obj;
  }
}

/** Everything but metadata and status: what a generation tracks. */
function specOf(obj: Obj): unknown {
  const { metadata: _m, status: _s, ...rest } = obj;
  return rest;
}

function sameOwners(a: Stored["owners"], b: Stored["owners"]): boolean {
  if (a.size !== b.size) return false;
  for (const [m, o] of a) {
    const other = b.get(m);
    if (!other || other.paths.size !== o.paths.size || [...o.paths].some((p) => !other.paths.has(p))) return false;
  }
  return true;
}

function mergeInto(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out = (typeof target === "object" && target !== null && !Array.isArray(target) ? target : {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergeInto(out[k], v);
  }
  return out;
}
