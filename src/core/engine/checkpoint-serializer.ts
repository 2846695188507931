import type { DBOSSerializer } from "@dbos-inc/dbos-sdk";
import { DBOSJSON, SERIALIZER_MARKER_KEY, SERIALIZER_MARKER_VALUE } from "@dbos-inc/dbos-sdk/internal/serialization";

/** Deeper than any checkpoint manent writes; a deeper (or cyclic) value goes through SuperJSON. */
const maxDepth = 200;

/**
 * DBOS's own format for workflow inputs and step outputs (SuperJSON, in DBOS's marked envelope),
 * written without SuperJSON's walk when the value is plain JSON, which manent's checkpoints are:
 * SuperJSON copies and annotates every value (a resolved deploy of 20,000 targets: ~0.5 s and ~30 MB,
 * and DBOS then walked the copy again for functions to stub). The text is byte for byte what
 * DBOS's serializer writes for such a value (`{"json":…,"__dbos_serializer":"superjson"}`), and any
 * other value (a Date, an `undefined` field, NaN, -0, a Map, a class instance, a cycle) is written by
 * DBOS's serializer itself, so what is read back is what SuperJSON would give, but for shared
 * references in plain data, which come back as equal copies. Rows carry this serializer's name;
 * DBOS resumes a workflow only with the version that started it (engine/version-upgrade.ts), and
 * rows written by older versions ("js_superjson") are still read by DBOS's own serializer.
 */
export const checkpointSerializer: DBOSSerializer = {
  name: () => "manent_json",
  stringify(value: unknown): string {
    return isPlainJson(value, 0)
      ? JSON.stringify({ json: value, [SERIALIZER_MARKER_KEY]: SERIALIZER_MARKER_VALUE })
      : DBOSJSON.stringify(value);
  },
  parse(text: string | null | undefined): unknown {
    if (text === null || text === undefined) return null;
    const parsed = JSON.parse(text) as unknown;
    // Nothing for SuperJSON to restore: JSON.parse already made a fresh value (SuperJSON would copy it again).
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      (parsed as Record<string, unknown>)[SERIALIZER_MARKER_KEY] === SERIALIZER_MARKER_VALUE &&
      "json" in parsed &&
      !("meta" in parsed)
    )
      return (parsed as { json: unknown }).json;
    return DBOSJSON.parse(text);
  },
};

/** Whether JSON.stringify then JSON.parse gives back an equal value: what SuperJSON would annotate is not. */
function isPlainJson(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(v) && !Object.is(v, -0);
    case "object": {
      if (v === null) return true;
      if (depth >= maxDepth) return false;
      if (Array.isArray(v)) {
        // for…of sees holes as undefined, which JSON would turn into null.
        for (const item of v) if (!isPlainJson(item, depth + 1)) return false;
        return true;
      }
      if (Object.getPrototypeOf(v) !== Object.prototype) return false;
      for (const key in v) {
        if (!Object.hasOwn(v, key)) return false;
        if (!isPlainJson((v as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}
