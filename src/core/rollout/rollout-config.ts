import { z } from "zod";
import { durationMs } from "../config/duration.js";

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
 *
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

const approvalStep = z.strictObject({
  approval: z
    .strictObject({
      timeout: durationMs.optional().describe("Abort the rollout when the approvals did not come within this time"),
      approvers: approversSchema.optional(),
    })
    .default({})
    .describe("Wait for `manent approve <id>` (or `manent promote`, which counts as the caller's approval)"),
});
const analysisStep = z.strictObject({
  analysis: z
    .strictObject({ checks: z.array(checkName).min(1).describe("Names of checks in the envconfig's `analysis.checks`") })
    .describe("Run checks; a failed one aborts the rollout"),
});
const weightStep = z.strictObject({
  set_weight: z.number().int().min(0).max(100).describe("Percentage of traffic (or of capacity, with `scale` only) sent to the candidate"),
});

export const gateSchema = z.union([pauseStep, approvalStep, analysisStep]);
export const canaryStepSchema = z.union([weightStep, pauseStep, approvalStep, analysisStep]);
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

export const canarySchema = z
  .strictObject({
    testers: z.boolean().default(false).describe("Route testers to the candidate (RouteTesters) before the first step"),
    steps: z.array(canaryStepSchema).max(100).default([]).describe("The steps between DeployCandidate and PromoteCandidate"),
  })
  .describe("Percentage rollout on plugins with slots: candidate beside the running release, traffic moved step by step");

export const rolloutSchema = z
  .strictObject({ waves: wavesSchema.optional(), canary: canarySchema.optional() })
  .describe("Progressive delivery: waves of targets and canary steps (inside each wave when both are set)");

export type ApproversSettings = z.output<typeof approversSchema>;
export type RolloutSettings = z.output<typeof rolloutSchema>;
export type WavesSettings = z.output<typeof wavesSchema>;
export type CanarySettings = z.output<typeof canarySchema>;

/** A short human name of a step or gate ("set_weight 10", "pause 5m", "approval", "analysis error-rate"). */
export function describeStep(s: CanaryStep): string {
  if ("set_weight" in s) return `set_weight ${s.set_weight}`;
  if ("pause" in s) return s.pause.duration === undefined ? "pause until promote" : `pause ${formatMs(s.pause.duration)}`;
  if ("approval" in s) {
    const parts = [
      s.approval.approvers && describeApprovers(s.approval.approvers),
      s.approval.timeout !== undefined && `timeout ${formatMs(s.approval.timeout)}`,
    ].filter(Boolean);
    return parts.length ? `approval (${parts.join(", ")})` : "approval";
  }
  return `analysis ${s.analysis.checks.join(", ")}`;
}

export function stepKind(s: CanaryStep): "set_weight" | "pause" | "approval" | "analysis" {
  return "set_weight" in s ? "set_weight" : "pause" in s ? "pause" : "approval" in s ? "approval" : "analysis";
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
