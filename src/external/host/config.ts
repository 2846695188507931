import { z } from "zod";
import { Code, ManentError } from "../../core/errors.js";
import { externalSchema, type ExternalSpec } from "../../core/config/manent-config.js";
import { parseDuration } from "../../core/config/duration.js";

/** The `external` settings of a plugin, with the start timeout in milliseconds. */
export interface ExternalConfig {
  command: string;
  args: string[];
  sha256?: string;
  env: Record<string, string>;
  startTimeoutMs: number;
}

/**
 * The `external` section as the engine hands it over: usually already parsed by the manent.yml
 * schema (ExternalSpec: `start_timeout` a number of milliseconds), or written by hand with a
 * Go-style duration string ("30s", "1m30s").
 */
const externalSection = externalSchema.extend({
  // A number here is milliseconds (what the manent.yml schema hands over), a string a duration.
  start_timeout: z
    .union([z.number().nonnegative(), z.string()])
    .default(60_000)
    .transform((v, ctx) => {
      if (typeof v === "number") return v;
      const ms = parseDuration(v);
      if (ms === undefined) {
        ctx.addIssue({ code: "custom", message: `"${v}" is not a duration (use e.g. 30s, 1m, 1m30s)` });
        return z.NEVER;
      }
      return ms;
    }),
});

/** From the `external` section as the manent.yml schema parsed it (start_timeout in ms). */
export function fromSpec(spec: ExternalSpec): ExternalConfig {
  const out: ExternalConfig = { command: spec.command, args: spec.args, env: spec.env, startTimeoutMs: spec.start_timeout };
  if (spec.sha256) out.sha256 = spec.sha256;
  return out;
}

/**
 * Splits a plugin entry into the `external` settings and the rest, which is the plugin's own
 * configuration, sent to its factory at Configure. A number for `start_timeout` is milliseconds
 * (the manent.yml schema's output); a string is a duration.
 */
export function parseExternalEntry(name: string, entry: Record<string, unknown>): { external: ExternalConfig; config: Record<string, unknown> } {
  const { external, ...config } = entry;
  const parsed = externalSection.safeParse(external);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `plugins.${name}.external${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`);
    throw new ManentError(Code.InvalidArgument, issues.join("; "), { details: { plugin: name } });
  }
  return { external: fromSpec(parsed.data), config };
}
