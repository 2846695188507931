import { z } from "zod";

/**
 * Renders a zod schema as a Markdown table of its keys (dotted paths), with the type, default,
 * description and examples that the schema itself carries (`.describe()`, `.meta()`). It reads
 * zod's definitions (`_zod.def`), which `z.toJSONSchema` also walks, because the JSON Schema
 * loses what matters here: the defaults of transformed fields (durations) and their kind.
 */

type Def = { type: string } & Record<string, unknown>;
type Schema = z.core.$ZodType;

interface Row {
  key: string;
  type: string;
  required: boolean;
  defaultValue?: string;
  description?: string;
  examples: string[];
}

const def = (s: Schema): Def => s._zod.def as unknown as Def;
const metaOf = (s: Schema): z.core.GlobalMeta | undefined => z.globalRegistry.get(s);

/** Unwraps optional/default/nullable/pipe layers, gathering metadata (outer layers win) and the default. */
function unwrap(schema: Schema): {
  inner: Schema;
  meta: z.core.GlobalMeta;
  optional: boolean;
  defaultValue?: unknown;
  hasDefault: boolean;
} {
  let s = schema;
  const meta: z.core.GlobalMeta = {};
  let optional = false;
  let hasDefault = false;
  let defaultValue: unknown;
  for (;;) {
    const m = metaOf(s);
    if (m) for (const [k, v] of Object.entries(m)) if (!(k in meta)) meta[k] = v;
    const d = def(s);
    if (meta.type !== undefined && d.type === "pipe") break; // a named kind (duration): stop at its transform
    if (d.type === "optional" || d.type === "nullable" || d.type === "readonly" || d.type === "nonoptional" || d.type === "catch") {
      if (d.type === "optional") optional = true;
      s = d.innerType as Schema;
    } else if (d.type === "default" || d.type === "prefault") {
      if (!hasDefault) {
        hasDefault = true;
        defaultValue = d.defaultValue;
      }
      optional = true;
      s = d.innerType as Schema;
    } else if (d.type === "pipe") {
      const input = def(d.in as Schema);
      // A transform's output says nothing of what one writes; the input does.
      s = (input.type === "transform" ? d.out : d.in) as Schema;
    } else if (d.type === "lazy") {
      s = (d.getter as () => Schema)();
    } else break;
  }
  return { inner: s, meta, optional, hasDefault, ...(hasDefault && { defaultValue }) };
}

function typeName(schema: Schema, meta: z.core.GlobalMeta): string {
  if (typeof meta.type === "string") return meta.type;
  const d = def(schema);
  const js =
    d.type === "string" || d.type === "number"
      ? (z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>)
      : {};
  switch (d.type) {
    case "string":
      return js.format === "uri" ? "URL" : "string";
    case "number": {
      const range =
        js.minimum !== undefined && js.maximum !== undefined
          ? ` ${String(js.minimum)}–${String(js.maximum)}`
          : js.minimum !== undefined
            ? ` ≥ ${String(js.minimum)}`
            : "";
      return (js.type === "integer" ? "integer" : "number") + range;
    }
    case "boolean":
      return "boolean";
    case "literal":
      return (d.values as unknown[]).map((v) => JSON.stringify(v)).join(" or ");
    case "enum":
      return Object.values(d.entries as Record<string, string>).join(" | ");
    case "array": {
      const el = unwrap(d.element as Schema);
      return def(el.inner).type === "object" ? "list of objects" : `list of ${typeName(el.inner, el.meta)}`;
    }
    case "record": {
      const v = unwrap(d.valueType as Schema);
      return def(v.inner).type === "object" ? "map of objects" : `map of ${typeName(v.inner, v.meta)}`;
    }
    case "union":
      return (d.options as Schema[]).map((o) => typeName(unwrap(o).inner, unwrap(o).meta)).join(" or ");
    case "object":
      return "object";
    case "unknown":
    case "any":
      return "any";
    default:
      return d.type;
  }
}

function formatDefault(value: unknown, type: string, schema: Schema): string {
  return `\`${defaultText(value, type, schema)}\``;
}

/**
 * A default as it would be written in the file (YAML flow style): an object's durations as
 * `5s`, like the rows of its keys, never the milliseconds they are parsed into.
 */
function defaultText(value: unknown, type: string, schema: Schema): string {
  if (type === "duration" && typeof value === "number") return formatDuration(value);
  if (Array.isArray(value)) return value.length === 0 ? "[]" : JSON.stringify(value);
  if (typeof value === "object" && value !== null) {
    const d = def(schema);
    const shape = d.type === "object" ? (d.shape as Record<string, Schema>) : {};
    const entries = Object.entries(value).map(([k, v]) => {
      const child = shape[k] ? unwrap(shape[k]) : undefined;
      return `${k}: ${child ? defaultText(v, typeName(child.inner, child.meta), child.inner) : JSON.stringify(v)}`;
    });
    return entries.length === 0 ? "{}" : `{${entries.join(", ")}}`;
  }
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** Milliseconds as manent reads durations: 1000 → "1s", 90000 → "1m30s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0";
  const parts: string[] = [];
  for (const [unit, size] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
    ["ms", 1],
  ] as const) {
    const n = Math.floor(ms / size);
    if (n > 0) parts.push(`${n}${unit}`);
    ms -= n * size;
  }
  return parts.join("");
}

function formatExample(v: unknown): string {
  return typeof v === "string" ? `\`${v}\`` : `\`${JSON.stringify(v)}\``;
}

function walk(schema: Schema, path: string, rows: Row[], required: boolean): void {
  const u = unwrap(schema);
  const d = def(u.inner);
  const type = typeName(u.inner, u.meta);
  if (path) {
    rows.push({
      key: path,
      type,
      required: required && !u.optional,
      ...(u.hasDefault && { defaultValue: formatDefault(u.defaultValue, type, u.inner) }),
      ...(typeof u.meta.description === "string" && { description: u.meta.description }),
      examples: Array.isArray(u.meta.examples) ? u.meta.examples.map(formatExample) : [],
    });
  }
  if (u.meta.type !== undefined) return;
  if (d.type === "object") {
    for (const [k, v] of Object.entries(d.shape as Record<string, Schema>)) walk(v, path ? `${path}.${k}` : k, rows, true);
  } else if (d.type === "union") {
    // One of several shapes (a step is `set_weight`, `pause`, `approval` or `analysis`): each
    // object shape's keys under the same path.
    for (const option of d.options as Schema[]) {
      const o = unwrap(option);
      if (def(o.inner).type === "object") {
        for (const [k, v] of Object.entries(def(o.inner).shape as Record<string, Schema>)) walk(v, path ? `${path}.${k}` : k, rows, false);
      }
    }
  } else if (d.type === "array") {
    const el = unwrap(d.element as Schema);
    const elType = def(el.inner).type;
    if (elType === "object" || elType === "union") walk(d.element as Schema, `${path}[]`, rows, true);
  } else if (d.type === "record") {
    const keyDef = def(unwrap(d.keyType as Schema).inner);
    const key = keyDef.type === "enum" ? `<${Object.values(keyDef.entries as Record<string, string>).join("|")}>` : "<name>";
    const v = unwrap(d.valueType as Schema);
    const vt = def(v.inner).type;
    // A map of one of several shapes (notifications.channels: slack, teams, email, webhook): each shape's keys.
    if (vt === "object" || vt === "union") walk(d.valueType as Schema, `${path}.${key}`, rows, false);
  }
  // The `[]` of a list of objects and the `<name>` of a map were pushed as the container's own row.
  if (path.endsWith("[]") || path.endsWith(">"))
    rows.splice(
      rows.findIndex((r) => r.key === path),
      1,
    );
}

const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** Keys of a schema that carry no description (`.describe()` or `.meta({ description })`). */
export function undocumentedKeys(schema: Schema): string[] {
  const rows: Row[] = [];
  walk(schema, "", rows, true);
  return rows.filter((r) => !r.description).map((r) => r.key);
}

/** The table of a schema's keys. */
export function schemaTable(schema: Schema): string {
  const rows: Row[] = [];
  walk(schema, "", rows, true);
  const lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"];
  for (const r of rows) {
    const dflt = r.defaultValue ?? (r.required ? "**required**" : "");
    const examples = r.examples.length ? ` Example: ${r.examples.join(", ")}.` : "";
    const description = (r.description ?? "").replace(/\.?$/, r.description ? "." : "");
    lines.push(`| \`${cell(r.key)}\` | ${cell(r.type)} | ${dflt} | ${cell(description + examples).trim()} |`);
  }
  return lines.join("\n");
}
