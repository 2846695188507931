/**
 * hclog's JSON log line, the format plugins write on stderr: `@level`, `@message`, `@timestamp`
 * (and `@module`, `@caller`), every other key an attribute.
 */
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

export interface LogLine {
  level: LogLevel;
  message: string;
  attrs: Record<string, unknown>;
  /** hclog's `@module` (the plugin's logger name) and `@timestamp`, when the line has them. */
  module?: string;
  timestamp?: string;
}

const levels: Record<string, LogLevel> = { trace: "trace", debug: "debug", info: "info", warn: "warn", warning: "warn", error: "error" };

/** Parses one stderr line; undefined when it is not an hclog JSON entry (forward it as-is). */
export function parseHclogLine(line: string): LogLine | undefined {
  if (!line.startsWith("{")) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const obj = raw as Record<string, unknown>;
  const level = typeof obj["@level"] === "string" ? levels[obj["@level"].toLowerCase()] : undefined;
  if (level === undefined || typeof obj["@message"] !== "string") return undefined;
  const attrs: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) if (!k.startsWith("@")) attrs[k] = v;
  return {
    level,
    message: obj["@message"],
    attrs,
    ...(typeof obj["@module"] === "string" && { module: obj["@module"] }),
    ...(typeof obj["@timestamp"] === "string" && { timestamp: obj["@timestamp"] }),
  };
}

/** hclog's JSON timestamp: microseconds and an explicit offset (`2006-01-02T15:04:05.000000Z07:00`). */
function hclogTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export function formatHclogLine(level: LogLevel, message: string, attrs?: Record<string, unknown>): string {
  const entry: Record<string, unknown> = { "@level": level, "@message": message, "@timestamp": hclogTimestamp(new Date()) };
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (k.startsWith("@")) continue;
    entry[k] = v instanceof Error ? v.message : v;
  }
  return JSON.stringify(entry) + "\n";
}
