import { Code, ManentError } from "../../core/errors.js";
import { externalSchema, type ExternalSpec } from "../../core/config/manent-config.js";

/** The `external` settings of a plugin, with the start timeout in milliseconds. */
export interface ExternalConfig {
  command: string;
  args: string[];
  sha256?: string;
  env: Record<string, string>;
  startTimeoutMs: number;
}

/** From the `external` section as the manent.yml schema parsed it (start_timeout in ms). */
export function fromSpec(spec: ExternalSpec): ExternalConfig {
  const out: ExternalConfig = { command: spec.command, args: spec.args, env: spec.env, startTimeoutMs: spec.start_timeout };
  if (spec.sha256) out.sha256 = spec.sha256;
  return out;
}

/**
 * Splits a raw manent.yml plugin entry into the `external` settings (validated with the
 * manent.yml schema, so durations read the same everywhere) and the rest, which is the plugin's
 * own configuration, sent to its factory at Configure.
 */
export function parseExternalEntry(name: string, entry: Record<string, unknown>): { external: ExternalConfig; config: Record<string, unknown> } {
  const { external, ...config } = entry;
  const parsed = externalSchema.safeParse(external);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `plugins.${name}.external${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`);
    throw new ManentError(Code.InvalidArgument, issues.join("; "), { details: { plugin: name } });
  }
  return { external: fromSpec(parsed.data), config };
}
