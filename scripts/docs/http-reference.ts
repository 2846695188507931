import { readFile } from "node:fs/promises";

/** A JSON Schema, as far as this page reads it. */
interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  description?: string;
  default?: unknown;
  nullable?: boolean;
  format?: string;
  minimum?: number;
  maximum?: number;
}
interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: JsonSchema }[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: JsonSchema }> }>;
}
export interface OpenApiDocument {
  info?: { title?: string; version?: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n+/g, " ");
const anchor = (name: string): string => `#${name.toLowerCase().replace(/[^a-z0-9_-]/g, "")}`;

function typeOf(s: JsonSchema | undefined): string {
  if (!s) return "any";
  if (s.$ref) {
    const name = s.$ref.split("/").at(-1)!;
    return `[${name}](${anchor(name)})`;
  }
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(" \\| ");
  const union = s.anyOf ?? s.oneOf;
  if (union) return union.map(typeOf).join(" or ");
  if (s.allOf) return s.allOf.map(typeOf).join(" and ");
  const type = Array.isArray(s.type) ? s.type.join(" or ") : s.type;
  if (type === "array") return `list of ${typeOf(s.items)}`;
  if (type === "object" && !s.properties && typeof s.additionalProperties === "object") return `map of ${typeOf(s.additionalProperties)}`;
  if (type === "integer" || type === "number") {
    const range = s.minimum !== undefined && s.maximum !== undefined ? ` ${s.minimum}–${s.maximum}` : "";
    return `${type}${range}`;
  }
  return type ?? "any";
}

function propertyRows(s: JsonSchema, prefix: string, rows: string[]): void {
  for (const [name, prop] of Object.entries(s.properties ?? {})) {
    const key = prefix + name;
    const required = s.required?.includes(name) ? "yes" : "";
    const dflt = prop.default !== undefined ? ` Default: \`${JSON.stringify(prop.default)}\`.` : "";
    const description = prop.description ? prop.description.replace(/\.?$/, ".") : "";
    rows.push(`| \`${key}\` | ${cell(typeOf(prop))} | ${required} | ${cell(description + dflt).trim()} |`);
    if (prop.properties) propertyRows(prop, `${key}.`, rows);
    else if (prop.items?.properties) propertyRows(prop.items, `${key}[].`, rows);
  }
}

function schemaTable(s: JsonSchema): string[] {
  if (!s.properties) return [`${typeOf(s)}${s.description ? `: ${s.description}` : ""}`];
  const rows = ["| Field | Type | Required | Description |", "|---|---|---|---|"];
  propertyRows(s, "", rows);
  return rows;
}

/** The HTTP API page, from the OpenAPI document the server serves. */
export function renderOpenApi(doc: OpenApiDocument): string {
  const lines: string[] = [];
  if (doc.info?.description) lines.push(doc.info.description, "");
  lines.push("The machine-readable document is [`openapi.json`](openapi.json) (served at `/api/v1/openapi.json`).", "", "## Routes", "");
  for (const [path, methods] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(methods)) {
      lines.push(`### \`${method.toUpperCase()} ${path}\``, "");
      if (op.summary) lines.push(op.summary.replace(/\.?$/, "."), "");
      if (op.description) lines.push(op.description, "");
      if (op.security && op.security.length === 0) lines.push("No token needed.", "");
      if (op.parameters?.length) {
        lines.push("| Parameter | In | Type | Required | Description |", "|---|---|---|---|---|");
        for (const p of op.parameters) {
          lines.push(
            `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required ? "yes" : ""} | ${cell(p.description ?? p.schema?.description ?? "")} |`,
          );
        }
        lines.push("");
      }
      const body = op.requestBody?.content?.["application/json"]?.schema;
      if (body) lines.push(`Request body: ${typeOf(body)}.`, "");
      const responses = Object.entries(op.responses ?? {});
      if (responses.length) {
        lines.push("| Status | Meaning | Body |", "|---|---|---|");
        for (const [status, r] of responses) {
          const content = Object.entries(r.content ?? {})[0];
          lines.push(
            `| ${status} | ${cell(r.description ?? "")} | ${content ? cell(content[1].schema ? typeOf(content[1].schema) : content[0]) : ""} |`,
          );
        }
        lines.push("");
      }
    }
  }
  const schemas = Object.entries(doc.components?.schemas ?? {});
  if (schemas.length) {
    lines.push("## Schemas", "");
    for (const [name, s] of schemas) lines.push(`### ${name}`, "", ...(s.description ? [s.description, ""] : []), ...schemaTable(s), "");
  }
  return lines.join("\n").trimEnd();
}

/**
 * The server's OpenAPI document, built in memory from the route definitions (no server, no
 * database: the document route needs none of the API's dependencies). Undefined while the API
 * has no OpenAPI document.
 */
export async function loadOpenApi(): Promise<OpenApiDocument | undefined> {
  const api = (await import("../../src/server/http-api.js")) as Record<string, unknown>;
  const create = api.createApiApp as ((deps: unknown) => { request(path: string): Promise<Response> | Response }) | undefined;
  if (typeof create !== "function") return undefined;
  // Every request is logged and counted (request-log.ts): those three are real, silent ones.
  const { RequestLog } = await import("../../src/server/request-log.js");
  const { httpMetrics } = await import("../../src/server/http-metrics.js");
  const { Registry } = await import("prom-client");
  const silent = { debug() {}, info() {}, warn() {}, error() {} };
  const logging: Record<string, unknown> = { requests: new RequestLog(), logger: silent, http: httpMetrics(new Registry()) };
  const unused = new Proxy(logging, {
    get(t, key) {
      if (typeof key === "string" && key in t) return t[key];
      throw new Error(`building the OpenAPI document used the API's dependency ${String(key)}`);
    },
  });
  const res = await create(unused).request("/api/v1/openapi.json");
  if (res.status !== 200) throw new Error(`/api/v1/openapi.json answered ${res.status}`);
  return (await res.json()) as OpenApiDocument;
}

/** Until the API has an OpenAPI document: its routes as the hand-written router declares them. */
export async function placeholderRoutes(repoRoot: string): Promise<string> {
  const source = await readFile(`${repoRoot}src/server/http-api.ts`, "utf8");
  const routes = [...source.matchAll(/path === "([^"]+)" && method === "([A-Z]+)"/g)].map((m) => `- \`${m[2]} ${m[1]}\``);
  return [
    "This version of manent-server does not serve an OpenAPI document yet; this page will be generated",
    "from `/api/v1/openapi.json` once it does. The routes its router declares:",
    "",
    ...routes,
    "- `GET /api/v1/deploys/{id}` (`?wait=seconds`) and `POST /api/v1/deploys/{id}/cancel`",
  ].join("\n");
}
