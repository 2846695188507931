import { z } from "zod";
import { durationMs } from "../config/duration.js";
import { secretRefSchema } from "../config/secret-ref.js";
import { describeHeaderRoute, headerRouteStep, mirrorStep } from "./traffic-steps.js";

/*
 * The `rollout:` section of an envconfig: waves of targets and percentage (canary) steps.
 *
 *   rollout:
 *     waves:
 *       by: [region, az]                      # target labels, outermost first
 *       order: {region: [eu-west, us-east]}   # values listed first, then the others in order of first appearance
 *       batch_size: 10                        # at most 10 targets per wave
 *       between:                              # gates run between two waves, in order
 *         - pause: 10m
 *         - approval: {timeout: 1h}
 *         - approval:                         # four eyes: two people of release-managers, not the submitter
 *             approvers: {count: 2, from_groups: [release-managers], allow_submitter: false}
 *         - analysis: {checks: [error-rate]}  # names from the envconfig's `analysis.checks`
 *     canary:
 *       testers: true                         # RouteTesters after DeployCandidate
 *       steps:
 *         - set_weight: 10
 *         - pause: 5m                         # `pause: {}` waits until `manent promote`
 *         - analysis: {checks: [error-rate]}
 *         - approval: {timeout: 30m}          # `approval: {}` waits without a timeout
 *         - set_weight: 50
 *         - set_header_route: {header: {name: X-Beta, value: "on"}}   # see ./traffic-steps.ts; `false` removes it
 *         - set_mirror: 20                    # a copy of 20 % of requests to the candidate
 *       session_affinity: true                # a client stays on the version it first reached
 *       # or, instead of steps, generated ones (Flagger's form): 20, 40, ... 80, each held 5m, checks after each
 *       # step_weight: 20, max_weight: 80, interval: 5m, step_analysis: {checks: [error-rate]}
 *       abort_scale_down_delay: 10m           # keep an aborted candidate (weight 0) this long before it is removed
 *     background_analysis:                    # measured at each check's interval during the canary, aborting when one fails
 *       checks: [error-rate]
 *       starting_step: 2                      # from the canary's 2nd step (default 1)
 *       waves: false                          # true: from the first wave to the end of the last, between waves too
 *     load_test: {url: http://loadtester/}    # POSTed the deploy's metadata when an analysis starts (Flagger's load tester)
 *
 * A `webhook: {url, interval, timeout}` step or gate waits until its URL answers 2xx (see ./webhook-gate.ts).
 * An analysis step or gate names checks of the envconfig's `analysis:` section (see ./analysis/).
 */

const checkName = z.string().min(1).max(100);

const pauseStep = z.strictObject({
  pause: z
    .union([
      durationMs,
      z.strictObject({ duration: durationMs.optional().describe("How long; without it the pause lasts until `manent promote`") }),
    ])
    .transform((p) => (typeof p === "number" ? { duration: p } : p))
    .describe("Wait a duration (e.g. 5m), or until `manent promote` with `pause: {}`"),
});
/**
 * Who must approve (separation of duties). Without it an approval is today's: the first approve (or
 * promote) by anyone the policy lets approve ends it, and `promote --full` skips it. With it, the
 * approval is never skipped, and ends once `count` distinct people (principal ids) allowed by it
 * have approved.
 */
export const approversSchema = z
  .strictObject({
    count: z.number().int().min(1).max(10).default(1).describe("How many distinct approvers are needed (each person or token counts once)"),
    from_groups: z
      .array(z.string().min(1).max(256))
      .min(1)
      .max(50)
      .refine((g) => new Set(g).size === g.length, { message: "lists a group twice" })
      .optional()
      .meta({
        description:
          "Only members of one of these groups may approve (the OpenID Connect groups claim, or a token's groups); without it, anyone allowed to approve there",
        examples: [["release-managers"]],
      }),
    allow_submitter: z
      .boolean()
      .default(true)
      .describe("Whether whoever submitted the deploy may be one of the approvers (false: four eyes)"),
  })
  .describe("Who must approve: a number of distinct approvers, from named groups, the submitter excluded or not");

const approvalSettings = z.strictObject({
  timeout: durationMs.optional().describe("Abort the rollout when the approvals did not come within this time"),
  approvers: approversSchema.optional(),
});
const approvalStep = z.strictObject({
  // Written bare (`- approval:`, null) or with settings. The key itself is required: were it
  // optional, every other step's shape would also match this one with an unknown field, and a
  // wrong `set_weight: x` would be reported as the unknown field "set_weight".
  approval: approvalSettings
    .nullable()
    .transform((v): z.output<typeof approvalSettings> => v ?? {})
    .describe("Wait for `manent approve <id>` (or `manent promote`, which counts as the caller's approval)"),
});
const analysisStep = z.strictObject({
  analysis: z
    .strictObject({ checks: z.array(checkName).min(1).describe("Names of checks in the envconfig's `analysis.checks`") })
    .describe("Run checks; a failed one aborts the rollout"),
});
/** An http(s) URL without credentials, POSTed by a webhook step or the load-test hook. */
export const webhookUrl = z
  .url({ protocol: /^https?$/, message: "must be an http(s) URL" })
  .max(2048)
  .refine((u) => !/^https?:\/\/[^/?#]*@/i.test(u), { message: "must not carry credentials (user:password@)" });

/** A webhook's credentials: a secret reference, so the token is in neither the envconfig nor the deploy's records. */
const webhookBearerToken = secretRefSchema
  .optional()
  .describe(
    'Secret reference ("file:/path" or "env:NAME") of a bearer token sent as Authorization; read at each call, never logged or recorded. Put credentials here, not in the URL\'s query (which the envconfig and the deploy record hold as written)',
  );

const webhookStep = z.strictObject({
  webhook: z
    .strictObject({
      url: webhookUrl.meta({
        description: "POSTed the deploy's metadata (JSON, no secrets) until it answers 2xx (go); any other answer, or none, is wait",
        examples: ["https://ci.example.com/manent/confirm"],
      }),
      bearer_token: webhookBearerToken,
      interval: durationMs
        .refine((ms) => ms >= 100 && ms <= 3_600_000, { message: "must be between 100ms and 1h" })
        .default(10_000)
        .describe("Time between two calls (default 10s)"),
      timeout: durationMs
        .refine((ms) => ms >= 1 && ms <= 7 * 24 * 3_600_000, { message: "must be between 1ms and 7d" })
        .default(3_600_000)
        .describe("Abort the rollout when the URL has not answered 2xx within this time (default 1h)"),
      call_timeout: durationMs
        .refine((ms) => ms >= 1 && ms <= 300_000, { message: "must be between 1ms and 5m" })
        .default(10_000)
        .describe("How long one call may take; a call without an answer counts as wait (default 10s)"),
    })
    .describe("Wait until a URL answers 2xx (confirm-promotion): `manent promote` goes on without it, `manent abort` stops"),
});
const weightStep = z.strictObject({
  set_weight: z.number().int().min(0).max(100).describe("Percentage of traffic (or of capacity, with `scale` only) sent to the candidate"),
});

export const gateSchema = z.union([pauseStep, approvalStep, analysisStep, webhookStep]);
export const canaryStepSchema = z.union([weightStep, pauseStep, approvalStep, analysisStep, webhookStep, headerRouteStep, mirrorStep]);
export type Gate = z.output<typeof gateSchema>;
export type CanaryStep = z.output<typeof canaryStepSchema>;

export const wavesSchema = z
  .strictObject({
    by: z
      .array(z.string().min(1).max(63))
      .max(8)
      .default([])
      .describe("Target labels grouping targets into waves, outermost first (e.g. [region, az])"),
    order: z
      .record(z.string(), z.array(z.string()))
      .default({})
      .describe("Per label, the values that go first, in this order; other values follow in order of first appearance"),
    batch_size: z.number().int().min(1).max(100_000).optional().describe("Cut each group into waves of at most this many targets"),
    between: z.array(gateSchema).max(20).default([]).describe("Gates run between two waves: pause, approval, analysis"),
  })
  .describe("Deploy targets one wave at a time");

/** The most steps `step_weight` may generate (each weight is a set_weight, a pause and maybe an analysis). */
export const maxGeneratedSteps = 300;

export const canarySchema = z
  .strictObject({
    testers: z.boolean().default(false).describe("Route testers to the candidate (RouteTesters) before the first step"),
    session_affinity: z
      .boolean()
      .default(false)
      .describe("A client that reached one version stays on it while both run (a cookie set by the router), whatever the weight"),
    steps: z
      .array(canaryStepSchema)
      .max(100)
      .optional()
      .describe("The steps between DeployCandidate and PromoteCandidate (or generate them with step_weight, max_weight, interval)"),
    step_weight: z
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .describe(
        "Generated steps (Flagger's form, instead of `steps`): raise the weight by this much at each step, up to max_weight; each step is `set_weight`, `pause: <interval>`, and the `step_analysis` checks when set",
      ),
    max_weight: z
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .describe(
        "With step_weight: the last weight before the promote (default 100); reached exactly even when not a multiple of step_weight",
      ),
    interval: durationMs.optional().describe("With step_weight (required there): how long each generated weight is held"),
    step_analysis: z
      .strictObject({ checks: z.array(checkName).min(1).describe("Names of checks in the envconfig's `analysis.checks`") })
      .optional()
      .describe("With step_weight: run these checks after each generated pause; a failed one aborts the rollout"),
    abort_scale_down_delay: durationMs
      .optional()
      .describe(
        "After an abort or a failure, keep the candidate (with weight 0) this long for inspection before RevertCandidate removes it; `manent promote <id>` removes it sooner. Durable: a server restart resumes the wait",
      ),
  })
  .superRefine((c, ctx) => {
    const generated = (["step_weight", "max_weight", "interval", "step_analysis"] as const).filter((k) => c[k] !== undefined);
    if (generated.length === 0) return;
    if (c.steps !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["steps"],
        message: `steps and ${generated.join(", ")} are two ways to write the canary's steps: use either steps or step_weight (with max_weight, interval), not both`,
      });
      return;
    }
    if (c.step_weight === undefined) {
      ctx.addIssue({
        code: "custom",
        path: [generated[0]!],
        message: `${generated[0]} generates steps with step_weight: set step_weight too`,
      });
      return;
    }
    if (c.interval === undefined)
      ctx.addIssue({ code: "custom", path: ["interval"], message: "step_weight needs interval: how long each weight is held (e.g. 1m)" });
    if (c.max_weight !== undefined && c.max_weight < c.step_weight)
      ctx.addIssue({ code: "custom", path: ["max_weight"], message: `max_weight ${c.max_weight} is below step_weight ${c.step_weight}` });
    const n = Math.ceil((c.max_weight ?? 100) / c.step_weight) * (c.step_analysis ? 3 : 2);
    if (n > maxGeneratedSteps)
      ctx.addIssue({
        code: "custom",
        path: ["step_weight"],
        message: `step_weight ${c.step_weight} generates ${n} steps, more than ${maxGeneratedSteps}: raise it`,
      });
  })
  .transform(({ steps, step_weight, max_weight, interval, step_analysis, ...rest }) => ({
    ...rest,
    steps: steps ?? (step_weight === undefined ? [] : generateSteps(step_weight, max_weight ?? 100, interval!, step_analysis?.checks)),
  }))
  .describe("Percentage rollout on plugins with slots: candidate beside the running release, traffic moved step by step");

/**
 * Flagger's form as steps: weights step_weight, 2·step_weight, … up to max_weight (which ends the
 * list even when it is not a multiple), each held `interval`, each followed by the checks.
 */
export function generateSteps(stepWeight: number, maxWeight: number, interval: number, checks?: string[]): CanaryStep[] {
  const out: CanaryStep[] = [];
  for (let w = stepWeight; ; w += stepWeight) {
    const weight = Math.min(w, maxWeight);
    out.push({ set_weight: weight }, { pause: { duration: interval } });
    if (checks) out.push({ analysis: { checks } });
    if (weight >= maxWeight) return out;
  }
}

export const backgroundAnalysisSchema = z
  .strictObject({
    checks: z
      .array(checkName)
      .min(1)
      .max(20)
      .refine((c) => new Set(c).size === c.length, { message: "lists a check twice" })
      .describe("Names of checks in the envconfig's `analysis.checks`, each measured at its own interval"),
    starting_step: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(1)
      .describe("The canary step (1-based) from which the checks run (default 1: from the first step)"),
    waves: z
      .boolean()
      .default(false)
      .describe(
        "false: within each canary, from starting_step until the promote (each wave's canary starts afresh); true: from the start (or the first canary's starting_step) until the last wave ends, between waves too, counts kept across waves",
      ),
  })
  .describe(
    "Checks measured in the background while the rollout waits (pauses, approvals, webhooks, analyses) and between its steps; one that fails (beyond its failure_limit or inconclusive_limit) aborts the rollout at once",
  );

export const loadTestSchema = z
  .strictObject({
    url: webhookUrl.meta({
      description:
        "POSTed the deploy's metadata (JSON, no secrets) at the start of every analysis step or gate and of the background analysis; a 2xx is success, anything else fails that analysis",
      examples: ["http://load-tester.test/manent"],
    }),
    bearer_token: webhookBearerToken,
    timeout: durationMs
      .refine((ms) => ms >= 1 && ms <= 300_000, { message: "must be between 1ms and 5m" })
      .default(10_000)
      .describe("How long one call may take (default 10s)"),
  })
  .describe("A load generator told to start before each analysis (Flagger's load tester `rollout` hook)");

export const rolloutSchema = z
  .strictObject({
    waves: wavesSchema.optional(),
    canary: canarySchema.optional(),
    background_analysis: backgroundAnalysisSchema.optional(),
    load_test: loadTestSchema.optional(),
    post_promotion_analysis: z
      .strictObject({ checks: z.array(checkName).min(1).describe("Names of checks in the envconfig's `analysis.checks`") })
      .optional()
      .describe(
        "Checks run once every target runs the new release (after the canary's final promote and the last wave), as an analysis step; when one fails, every target is rolled back to the release before and the deploy ends rolled_back naming the check (Argo Rollouts' postPromotionAnalysis). `manent abort` during it rolls back too; `promote --full` skips it",
      ),
  })
  .describe("Progressive delivery: waves of targets and canary steps (inside each wave when both are set)");

export type ApproversSettings = z.output<typeof approversSchema>;
export type RolloutSettings = z.output<typeof rolloutSchema>;
export type WavesSettings = z.output<typeof wavesSchema>;
export type CanarySettings = z.output<typeof canarySchema>;
export type BackgroundAnalysisSettings = z.output<typeof backgroundAnalysisSchema>;
export type LoadTestSettings = z.output<typeof loadTestSchema>;
export type WebhookSettings = z.output<typeof webhookStep>["webhook"];

/** A short human name of a step or gate ("set_weight 10", "pause 5m", "approval", "analysis error-rate"). */
export function describeStep(s: CanaryStep): string {
  if ("set_weight" in s) return `set_weight ${s.set_weight}`;
  if ("set_header_route" in s) return describeHeaderRoute(s.set_header_route);
  if ("set_mirror" in s) return `set_mirror ${s.set_mirror}`;
  if ("pause" in s) return s.pause.duration === undefined ? "pause until promote" : `pause ${formatMs(s.pause.duration)}`;
  if ("approval" in s) {
    const parts = [
      s.approval.approvers && describeApprovers(s.approval.approvers),
      s.approval.timeout !== undefined && `timeout ${formatMs(s.approval.timeout)}`,
    ].filter(Boolean);
    return parts.length ? `approval (${parts.join(", ")})` : "approval";
  }
  if ("webhook" in s) return `webhook ${shownUrl(s.webhook.url)}`;
  return `analysis ${s.analysis.checks.join(", ")}`;
}

export function stepKind(s: CanaryStep): "set_weight" | "set_header_route" | "set_mirror" | "pause" | "approval" | "analysis" | "webhook" {
  if ("set_header_route" in s) return "set_header_route";
  if ("set_mirror" in s) return "set_mirror";
  return "set_weight" in s ? "set_weight" : "pause" in s ? "pause" : "approval" in s ? "approval" : "webhook" in s ? "webhook" : "analysis";
}

/** A URL as messages and records show it: the query (which may carry a token) and any fragment left out. */
export function shownUrl(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}${u.search ? "?…" : ""}`;
}

export function formatMs(ms: number): string {
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** "2 approvers from release-managers, not the submitter". */
export function describeApprovers(a: ApproversSettings): string {
  const who = `${a.count} approver${a.count === 1 ? "" : "s"}`;
  const from = a.from_groups ? ` from ${a.from_groups.join(" or ")}` : "";
  return `${who}${from}${a.allow_submitter ? "" : ", not the submitter"}`;
}
