import { z } from "zod";
import { durationMs } from "../../config/duration.js";
import { secretRefSchema } from "../../config/secret-ref.js";
import { ConditionError, compileCondition, type ResultKind } from "./condition.js";
import { VariableError, analysisVariables, checkPromqlTemplate, checkUrlTemplate } from "./variables.js";

const variablesNote = `Variables \${${analysisVariables.join("}, ${")}} are substituted, escaped for where they stand.`;

/** An http(s) URL without credentials (they belong in `bearer_token`, a secret reference). */
function httpUrl(what: string, allowVariables: boolean) {
  return z
    .string()
    .min(1)
    .max(2048)
    .superRefine((text, ctx) => {
      let probe = text;
      if (allowVariables) {
        try {
          checkUrlTemplate(text);
        } catch (err) {
          if (!(err instanceof VariableError)) throw err;
          ctx.addIssue({ code: "custom", message: err.message });
          return;
        }
        probe = text.replace(/\$\{[A-Za-z_][A-Za-z0-9_]*\}/g, "x");
      } else if (text.includes("${")) {
        ctx.addIssue({ code: "custom", message: `variables are not substituted in the ${what}` });
        return;
      }
      let url: URL;
      try {
        url = new URL(probe);
      } catch {
        ctx.addIssue({ code: "custom", message: `${JSON.stringify(text)} is not a URL` });
        return;
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") ctx.addIssue({ code: "custom", message: `the ${what} must be http(s)` });
      if (url.username || url.password) {
        ctx.addIssue({ code: "custom", message: `the ${what} must not carry credentials (use bearer_token: file:… or env:…)` });
      }
    });
}

const timeout = durationMs
  .refine((ms) => ms >= 1 && ms <= 300_000, { message: "must be between 1ms and 5m" })
  .default(10_000)
  .describe("How long one measurement may take before it counts as inconclusive (default 10s, at most 5m).");

const bearerToken = secretRefSchema
  .optional()
  .describe(
    'Secret reference ("file:/path" or "env:NAME") of a bearer token sent as Authorization; read at each measurement, never logged or recorded.',
  );

const prometheusSchema = z
  .strictObject({
    address: httpUrl("Prometheus address", false).describe(
      "Base URL of the Prometheus server (e.g. http://prometheus:9090); /api/v1/query is appended.",
    ),
    query: z
      .string()
      .min(1)
      .max(10_000)
      .superRefine((query, ctx) => {
        try {
          checkPromqlTemplate(query);
        } catch (err) {
          if (!(err instanceof VariableError)) throw err;
          ctx.addIssue({ code: "custom", message: err.message });
        }
      })
      .describe(`PromQL instant query; it must return one number (a scalar or one series). ${variablesNote}`),
    timeout,
    bearer_token: bearerToken,
  })
  .describe("A Prometheus instant query (/api/v1/query); its one value is `result`.");

const httpSchema = z
  .strictObject({
    url: httpUrl("url", true).describe(`The http(s) URL to request; redirects are not followed. ${variablesNote}`),
    method: z.enum(["GET", "HEAD", "POST"]).default("GET").describe("HTTP method (default GET)."),
    body: z.string().max(65_536).optional().describe("Request body, for POST."),
    headers: z
      .record(
        z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, { message: "must be an HTTP header name" }),
        z.string().regex(/^[\x20-\x7e]*$/, { message: "must be printable ASCII" }),
      )
      .default({})
      .describe("Extra request headers (not secrets: use bearer_token for credentials)."),
    expected_status: z
      .array(z.number().int().min(100).max(599))
      .min(1)
      .optional()
      .describe("Status codes that count as healthy (default: any 2xx); any other is a failed measurement."),
    json_field: z
      .string()
      .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, { message: 'must be a dotted path such as "checks.db.status" or "items.0.ready"' })
      .optional()
      .describe("Dotted path of a field in the JSON response; its value is `result` for the conditions (numbers index arrays)."),
    timeout,
    bearer_token: bearerToken,
  })
  .describe("An HTTP check: the status code, and optionally a condition on a field of the JSON response.");

function condition(what: string) {
  return z.string().min(1).max(500, { message: "longer than 500 characters" }).describe(what);
}

/** One named check of `analysis.checks`. */
export const analysisCheckSchema = z
  .strictObject({
    prometheus: prometheusSchema.optional(),
    http: httpSchema.optional(),
    success_condition: condition(
      "When the measured value is healthy, e.g. `result < 0.05`: comparisons (< <= > >= == !=) of `result` with numbers, strings, true/false/null, joined by and/or/not and parentheses.",
    ).optional(),
    failure_condition: condition(
      "When the measured value is bad, e.g. `result >= 0.2`. With both conditions, a value that meets neither is inconclusive; with only one, not meeting it decides.",
    ).optional(),
    interval: durationMs.default(60_000).describe("Time between two measurements (default 1m)."),
    count: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(1)
      .describe(
        "Conclusive measurements (successful or failed) to take; the check succeeds after them unless it failed first (default 1).",
      ),
    failure_limit: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(0)
      .describe("Failed measurements tolerated: one more fails the check (default 0: the first failure fails it)."),
    inconclusive_limit: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(2)
      .describe(
        "Inconclusive measurements tolerated (an unreachable server, an error answer, an empty or multi-series result, a missing field); one more fails the check (default 2). They do not count towards `count`.",
      ),
  })
  .superRefine((check, ctx) => {
    const kinds = [check.prometheus && "prometheus", check.http && "http"].filter(Boolean);
    if (kinds.length !== 1) {
      ctx.addIssue({ code: "custom", message: "a check needs exactly one of prometheus or http" });
      return;
    }
    const hasCondition = check.success_condition !== undefined || check.failure_condition !== undefined;
    if (check.prometheus && !hasCondition) {
      ctx.addIssue({
        code: "custom",
        path: ["success_condition"],
        message: "a prometheus check needs success_condition or failure_condition",
      });
    }
    if (check.http) {
      if (check.http.json_field === undefined && hasCondition) {
        const field = check.success_condition !== undefined ? "success_condition" : "failure_condition";
        ctx.addIssue({ code: "custom", path: [field], message: "a condition needs http.json_field, the value it applies to" });
      }
      if (check.http.json_field !== undefined && !hasCondition) {
        ctx.addIssue({ code: "custom", path: ["http", "json_field"], message: "json_field needs success_condition or failure_condition" });
      }
    }
    const kind: ResultKind = check.prometheus ? "number" : "json";
    for (const field of ["success_condition", "failure_condition"] as const) {
      const source = check[field];
      if (source === undefined) continue;
      try {
        compileCondition(source, kind);
      } catch (err) {
        if (!(err instanceof ConditionError)) throw err;
        ctx.addIssue({ code: "custom", path: [field], message: `${JSON.stringify(source)}: ${err.message}` });
      }
    }
  })
  .describe("A named analysis check: a Prometheus query or an HTTP check, judged by its conditions and limits.");

export type AnalysisCheck = z.output<typeof analysisCheckSchema>;

const checkName = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** The envconfig key `analysis`: named checks that rollout steps and waves refer to. */
export const analysisSectionSchema = z
  .strictObject({
    checks: z
      .record(z.string(), analysisCheckSchema)
      .default({})
      .superRefine((checks, ctx) => {
        // Checked here rather than as the record's key schema so that the error names the key.
        for (const name of Object.keys(checks)) {
          if (!checkName.test(name)) {
            ctx.addIssue({ code: "custom", path: [name], message: "check names are lowercase letters, digits, - and _ (at most 63)" });
          }
        }
      })
      .describe("Checks by name (lowercase letters, digits, - and _); a rollout's analysis steps name the checks they run."),
  })
  .describe("Metric analysis for progressive rollouts: named checks run at analysis steps and between waves.");

export type AnalysisSection = z.output<typeof analysisSectionSchema>;
