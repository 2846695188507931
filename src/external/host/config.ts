import { z } from "zod";
import { Code, ManentError } from "../../core/errors.js";

/** `1m`, `30s`, `1500ms`, `2h` or a number of milliseconds. */
export function parseDuration(value: string | number, field: string): number {
  if (typeof value === "number") return value;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(value.trim());
  if (!m) throw new ManentError(Code.InvalidArgument, `${field}: ${JSON.stringify(value)} is not a duration (like 30s, 1m)`, { details: { field } });
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
  return Math.round(Number(m[1]) * unit);
}

const duration = z.union([z.string(), z.number().nonnegative()]);

/** The `external` key of a manent.yml plugin entry. */
export const externalSchema = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex characters")
    .transform((s) => s.toLowerCase())
    .optional(),
  env: z.record(z.string(), z.string()).default({}),
  start_timeout: duration.default("1m"),
});

export interface ExternalConfig {
  command: string;
  args: string[];
  sha256?: string;
  env: Record<string, string>;
  startTimeoutMs: number;
}

/**
 * Splits a manent.yml plugin entry into the `external` settings and the rest, which is the
 * plugin's own configuration (sent to its factory at Configure).
 */
export function parseExternalEntry(name: string, entry: Record<string, unknown>): { external: ExternalConfig; config: Record<string, unknown> } {
  const { external, ...config } = entry;
  const parsed = externalSchema.safeParse(external);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `plugins.${name}.external${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`);
    throw new ManentError(Code.InvalidArgument, issues.join("; "), { details: { plugin: name } });
  }
  const e = parsed.data;
  const out: ExternalConfig = {
    command: e.command,
    args: e.args,
    env: e.env,
    startTimeoutMs: parseDuration(e.start_timeout, `plugins.${name}.external.start_timeout`),
  };
  if (e.sha256) out.sha256 = e.sha256;
  return { external: out, config };
}
