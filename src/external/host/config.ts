import { z } from "zod";
import { Code, ManentError } from "../../core/errors.js";
import { externalSchema, type ExternalSpec } from "../../core/config/manent-config.js";
import { parseDuration } from "../../core/config/duration.js";
import type { SupervisionOptions } from "./supervision.js";

/** The `external` settings of a plugin, with the start timeout in milliseconds. */
export interface ExternalConfig {
  command: string;
  args: string[];
  sha256?: string;
  env: Record<string, string>;
  startTimeoutMs: number;
  /** manent.yml's `external.supervision`, over the defaults. */
  supervision: Partial<SupervisionOptions>;
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

function supervisionOf(spec: Pick<Partial<ExternalSpec>, "supervision">): Partial<SupervisionOptions> {
  const s = spec.supervision ?? {};
  const out: Partial<SupervisionOptions> = {};
  if (s.ping_interval !== undefined) out.pingIntervalMs = s.ping_interval;
  if (s.ping_timeout !== undefined) out.pingTimeoutMs = s.ping_timeout;
  if (s.max_ping_failures !== undefined) out.pingFailureBudget = s.max_ping_failures;
  if (s.max_restart_attempts !== undefined) out.maxRestarts = s.max_restart_attempts;
  if (s.restart_backoff !== undefined) out.backoffBaseMs = s.restart_backoff;
  if (s.max_backoff !== undefined) out.backoffMaxMs = s.max_backoff;
  if (s.health_reset_threshold !== undefined) out.healthResetThreshold = s.health_reset_threshold;
  if (s.cooldown !== undefined) out.cooldownMs = s.cooldown;
  return out;
}

/** From the `external` section as the manent.yml schema parsed it (start_timeout in ms). */
export function fromSpec(spec: Omit<ExternalSpec, "supervision"> & Partial<Pick<ExternalSpec, "supervision">>): ExternalConfig {
  const out: ExternalConfig = {
    command: spec.command,
    args: spec.args,
    env: spec.env,
    startTimeoutMs: spec.start_timeout,
    supervision: supervisionOf(spec),
  };
  if (spec.sha256) out.sha256 = spec.sha256;
  return out;
}

/**
 * Splits a plugin entry into the `external` settings and the rest, which is the plugin's own
 * configuration, sent to its factory at Configure. A number for `start_timeout` is milliseconds
 * (the manent.yml schema's output); a string is a duration.
 */
export function parseExternalEntry(
  name: string,
  entry: Record<string, unknown>,
): { external: ExternalConfig; config: Record<string, unknown> } {
  const { external, ...config } = entry;
  const parsed = externalSection.safeParse(external);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `plugins.${name}.external${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`);
    throw new ManentError(Code.InvalidArgument, issues.join("; "), { details: { plugin: name } });
  }
  return { external: fromSpec(parsed.data), config };
}
