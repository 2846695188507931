import { z } from "zod";
import { parse as parseYaml } from "yaml";
import { parseDuration } from "../../core/config/duration.js";
import { Code, ManentError } from "../../core/errors.js";

const bool = z
  .enum(["true", "false"])
  .default("false")
  .transform((v) => v === "true");
const duration = z.string().transform((v, ctx) => {
  const ms = parseDuration(v);
  if (ms === undefined) {
    ctx.addIssue({ code: "custom", message: `not a duration like 3m or 90s: ${JSON.stringify(v)}` });
    return z.NEVER;
  }
  return ms;
});
const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a DNS label (lowercase letters, digits, '-')");

/** The plugin's fixed params; the `var.*` and `helm_value.*` families are read separately. */
export const paramsSchema = z.object({
  namespace: dnsLabel.describe(
    "Namespace the objects are applied in and the release history is kept in; an object naming another namespace is refused",
  ),
  token_secret: z
    .string()
    .min(1)
    .describe(
      "Secret holding the bearer token of the account manent uses on the cluster (a target label `token_secret` overrides it for that cluster)",
    ),
  ca_secret: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Secret holding the PEM CA bundle the API server's certificate is verified against (a target label overrides it); without it, the system CAs",
    ),
  wait_timeout: duration
    .default(300_000)
    .describe("How long to wait for the applied workloads to become available (`0`: do not wait)")
    .meta({ type: "duration" }),
  require_image_digest: bool.describe('With `"true"`, every container image must be pinned by `@sha256:` digest; a mutable tag is refused'),
  history_limit: z
    .string()
    .regex(/^[1-9]\d*$/, "must be a positive integer")
    .default("10")
    .transform(Number)
    .describe("How many releases (history ConfigMaps) are kept in the namespace for rollback"),
  force_conflicts: bool.describe(
    'With `"true"`, take over fields another field manager owns (otherwise such a conflict fails the deploy permanently; only Helm-owned objects are forced)',
  ),
  helm_values_files: z.string().optional().describe("Charts: values files inside the chart, comma-separated, applied in order"),
  helm_values: z
    .string()
    .optional()
    .refine((v) => {
      if (v === undefined) return true;
      try {
        const parsed: unknown = parseYaml(v);
        return parsed === null || (typeof parsed === "object" && !Array.isArray(parsed));
      } catch {
        return false;
      }
    }, "must be a YAML mapping")
    .describe("Charts: values as a YAML mapping, applied after `helm_values_files`"),
  helm_include_hooks: bool.describe(
    'Charts: with `"true"`, the chart\'s hook objects are applied with the others (by default they are left out)',
  ),
  helm_release_name: dnsLabel
    .optional()
    .describe("Charts: the release name the chart is rendered with (default: the artifact's name, lowercased)"),
  traffic_route: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, "must be an HTTPRoute name (lowercase letters, digits, '-', '.')")
    .optional()
    .describe(
      "Percentage rollouts: the Gateway API HTTPRoute (in `namespace`) whose backendRefs get the weights; without it the weight is the candidate's share of replicas",
    ),
  tester_header: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,100}:\s*[^\s].{0,199}$/, "must be a header as Name: value")
    .default("X-Canary: always")
    .describe("Percentage rollouts with a route: the header (`Name: value`) that sends testers to the candidate"),
});
const schema = paramsSchema;

export interface KubernetesParams extends z.output<typeof schema> {
  /** `var.NAME` params, substituted as `${NAME}` in manifests. */
  vars: Record<string, string>;
  /** `helm_value.KEY` params, passed as `--set-string KEY=VALUE`. */
  helmSet: Record<string, string>;
  helmValuesFiles: string[];
}

const knownPrefixes = ["var.", "helm_value."];

/** Validates the params of a request; a bad param is a permanent `invalid_argument`. */
export function parseParams(params: Record<string, string>): KubernetesParams {
  const fixed: Record<string, string> = {};
  const vars: Record<string, string> = {};
  const helmSet: Record<string, string> = {};
  const unknown: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (k.startsWith("var.")) vars[k.slice(4)] = v;
    else if (k.startsWith("helm_value.")) helmSet[k.slice(11)] = v;
    else if (k in schema.shape) fixed[k] = v;
    else unknown.push(k);
  }
  if (unknown.length > 0) {
    throw new ManentError(
      Code.InvalidArgument,
      `kubernetes: unknown param ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${Object.keys(schema.shape).join(", ")}, ${knownPrefixes.map((p) => `${p}*`).join(", ")})`,
    );
  }
  for (const name of Object.keys(vars)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new ManentError(Code.InvalidArgument, `kubernetes: param "var.${name}": variable names are letters, digits and '_'`);
    }
  }
  const parsed = schema.safeParse(fixed);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ManentError(Code.InvalidArgument, `kubernetes: param "${issue.path.join(".")}": ${issue.message}`, {
      details: { field: issue.path.join(".") },
    });
  }
  const helmValuesFiles = (parsed.data.helm_values_files ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return { ...parsed.data, vars, helmSet, helmValuesFiles };
}
