import { z } from "@hono/zod-openapi";

/** The `rollout` section of a deploy (see src/core/rollout/rollout-state.ts), for the OpenAPI document. */

const waveSchema = z.object({
  index: z.number().int().describe("1-based"),
  name: z.string().describe('the label values of its targets, e.g. "region=eu-west az=a", or "all targets"'),
  labels: z.record(z.string(), z.string()),
  hosts: z.array(z.string()).describe("the wave's targets, by identity (envconfig name, else host)"),
  status: z.enum(["pending", "running", "succeeded", "failed", "rolled_back", "skipped"]),
});

const canarySchema = z.object({
  wave: z.number().int().nullable().describe("the wave it runs in; null without waves"),
  steps: z.array(z.string()).describe('the steps as the envconfig lists them, e.g. "set_weight 10", "pause 5m"'),
  step: z.number().int().describe("1-based current step; 0 before the first, steps+1 once stepping is over"),
  phase: z.enum(["preparing", "deploying_candidate", "stepping", "promoting", "promoted", "reverting", "reverted"]),
  weight: z.number().int().describe("the candidate's traffic weight, percent"),
  traffic: z.record(z.string(), z.string()).nullable().describe("what PrepareSlots returned, passed to every later call"),
  testers: z.record(z.string(), z.string()).nullable().describe("what RouteTesters returned: how testers reach the candidate"),
});

const waitingSchema = z.object({
  kind: z.enum(["pause", "approval", "webhook"]).describe("webhook: a step waiting until a URL answers 2xx"),
  step: z.string(),
  since: z.string(),
  until: z.string().nullable().describe("when the pause ends or the approval times out; null for none"),
  hint: z
    .string()
    .describe('what to do and who is awaited, e.g. "waiting for approval: manent approve <id> (1 of 2 approvals from release-managers)"'),
  approvers: z
    .object({
      count: z.number().int().describe("distinct approvers needed"),
      from_groups: z.array(z.string()).describe("groups an approver must be in; empty: anyone allowed to approve there"),
      allow_submitter: z.boolean().describe("whether the deploy's submitter may approve"),
      explicit: z.boolean().describe("the envconfig names the approvers: promote --full does not skip this approval"),
    })
    .nullable()
    .optional()
    .describe("an approval's requirements; null for a pause"),
});

export const approvalSchema = z
  .object({
    step: z.string().describe('the approval step or gate, e.g. "canary-2:approval"'),
    by: z.string().describe("the approver's name (e-mail, subject or token name)"),
    by_id: z.string().describe('the approver\'s principal id ("user:<sub>", "token:<name>"): each counts once per step'),
    at: z.string(),
    command: z.enum(["approve", "promote"]).describe("a plain promote during an approval counts as its sender's approval"),
  })
  .openapi("Approval");

export const measurementSchema = z.object({
  step: z.string(),
  check: z.string(),
  at: z.string(),
  value: z.union([z.number(), z.string()]).nullable(),
  verdict: z.enum(["successful", "failed", "inconclusive"]),
  message: z.string(),
});

const backgroundSchema = z
  .object({
    status: z.enum(["pending", "running", "stopped", "failed"]).describe("failed: a check failed and the rollout was aborted"),
    since: z.string().nullable().describe("when it (last) started"),
    starting_step: z.number().int().nullable().describe("the canary step from which it runs; null when it spans the waves"),
    checks: z.array(
      z.object({
        check: z.string(),
        measured: z.number().int(),
        failed: z.number().int(),
        inconclusive: z.number().int(),
        last: measurementSchema.omit({ step: true, check: true }).nullable().describe("the last measurement"),
      }),
    ),
    message: z.string().nullable().describe("why it failed: the check, its value and the condition"),
  })
  .describe("the background analysis: checks measured while the rollout runs, aborting it when one fails");

export const commandRecordSchema = z
  .object({
    command: z.enum(["approve", "promote", "abort"]),
    full: z.boolean().describe("promote --full: every remaining step skipped"),
    by: z.string().nullable().describe("the API token's name"),
    at: z.string(),
    during: z.string().nullable().describe("what the rollout was doing or waiting for"),
  })
  .openapi("RolloutCommand");

export const rolloutViewSchema = z
  .object({
    waves: z.array(waveSchema).describe("empty without wave settings"),
    current_wave: z.number().int().nullable(),
    canary: canarySchema.nullable(),
    waiting: waitingSchema.nullable().describe("what the rollout waits for, and how to go on"),
    measurements: z.array(measurementSchema).describe("every analysis measurement"),
    approvals: z.array(approvalSchema).optional().describe("every counted approval, in order: who, when, at which step"),
    background: backgroundSchema.optional(),
    message: z.string().nullable().describe("why the rollout stopped early: the step and the reason"),
    commands: z.array(commandRecordSchema).describe("operator commands, with who sent them and when"),
  })
  .openapi("Rollout");
