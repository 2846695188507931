import type { DBOSSerializer } from "@dbos-inc/dbos-sdk";
import { DBOSJSON, SERIALIZER_MARKER_KEY, SERIALIZER_MARKER_VALUE } from "@dbos-inc/dbos-sdk/internal/serialization";

/** Deeper than any checkpoint manent writes; a deeper (or cyclic) value goes through SuperJSON. */
const maxDepth = 200;

/**
 * Workflow inputs, outputs and step outputs as DBOS stores them for manent: a plain JSON value
 * (which manent's checkpoints are) as its JSON text, and any other value (a Date, an `undefined`
 * field, NaN, -0, a Map, a class instance, a cycle) by DBOS's own serializer (SuperJSON, in DBOS's
 * marked envelope `{"json":…,"meta":…,"__dbos_serializer":"superjson"}`), so what is read back is
 * what SuperJSON would give, but for shared references in plain data, which come back as equal
 * copies. SuperJSON copies and annotates every value (a resolved deploy of 20,000 targets: ~0.5 s
 * and ~30 MB), and DBOS then walked the copy again for functions to stub; and the envelope costs
 * about 40 bytes a value, on every deploy's kept output (issue 31, bytes per deploy). A plain
 * object that has the envelope's marker itself is written in the envelope without `meta`, as
 * versions before this wrote every plain value, and still read. Rows carry this serializer's name;
 * DBOS resumes a workflow only with the version that started it (engine/version-upgrade.ts), and
 * rows written by older versions ("js_superjson") are still read by DBOS's own serializer.
 */
export const checkpointSerializer: DBOSSerializer = {
  name: () => "manent_json",
  stringify(value: unknown): string {
    if (!isPlainJson(value, 0)) return DBOSJSON.stringify(value);
    return enveloped(value) ? JSON.stringify({ json: value, [SERIALIZER_MARKER_KEY]: SERIALIZER_MARKER_VALUE }) : JSON.stringify(value);
  },
  parse(text: string | null | undefined): unknown {
    if (text === null || text === undefined) return null;
    const parsed = JSON.parse(text) as unknown;
    if (!enveloped(parsed)) return parsed;
    // Nothing for SuperJSON to restore: JSON.parse already made a fresh value (SuperJSON would copy it again).
    if ("json" in parsed && !("meta" in parsed)) return parsed.json;
    return DBOSJSON.parse(text);
  },
};

/** An object that DBOS's serializer's envelope would be read as: it has the envelope's marker. */
function enveloped(v: unknown): v is Record<string, unknown> {
  return (
    typeof v === "object" &&
    v !== null &&
    !Array.isArray(v) &&
    Object.hasOwn(v, SERIALIZER_MARKER_KEY) &&
    (v as Record<string, unknown>)[SERIALIZER_MARKER_KEY] === SERIALIZER_MARKER_VALUE
  );
}

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
