import { z } from "@hono/zod-openapi";
import { descriptorFile, descriptorObject, errorJsonSchema, overrideText } from "./api-schemas.js";
import { approvalSchema, measurementSchema } from "./rollout-schemas.js";

/** Releases in the HTTP API (see src/core/release/release-store.ts), validated and documented from here. */

export const releaseIdParams = z.object({
  id: z
    .string()
    .regex(/^[0-9a-f-]{36}$/, "not a release id")
    .openapi({ param: { name: "id", in: "path" }, example: "5d0c1c7e-3a8e-4e8b-a1f2-9b7d2c4e6f10" }),
});

const releaseStatus = z.enum(["running", "succeeded", "failed", "cancelled"]);

export const startReleaseBodySchema = z
  .strictObject({
    descriptor: descriptorObject.describe("the descriptor (apiVersion: manent/v1) of what is released; its environment is not used"),
    descriptor_file: descriptorFile.describe("the descriptor's file name, used in error messages"),
    overrides: z
      .strictObject({ version: overrideText(128).optional(), source: overrideText(4096).optional(), sha256: overrideText(64).optional() })
      .default({}),
  })
  .openapi("StartReleaseRequest");

export const promoteReleaseBodySchema = z
  .strictObject({
    to: z
      .string()
      .min(1)
      .max(63)
      .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, "must be lower-case letters, digits, '.', '_' or '-'")
      .describe("the environment to promote to: one of the manual stage the release waits at"),
  })
  .openapi("PromoteReleaseRequest");

const waitingSchema = z.object({
  kind: z.enum(["promotion", "approval", "soak", "analysis"]),
  stage: z.number().int().describe("1-based stage index"),
  environments: z.array(z.string()),
  since: z.string(),
  until: z.string().nullable().describe("when the soak ends or the approval times out (recorded: kept across restarts); null for none"),
  hint: z.string().describe('what to do, e.g. "waiting for promotion: manent release promote <id> --to staging"'),
  approvers: z
    .object({ count: z.number().int(), from_groups: z.array(z.string()), allow_submitter: z.boolean(), explicit: z.boolean() })
    .nullable()
    .describe("an approval's requirements; null otherwise"),
});

const stageSchema = z
  .object({
    index: z.number().int().describe("1-based"),
    environments: z.array(z.string()),
    status: z.enum(["pending", "waiting", "deploying", "soaking", "analysing", "succeeded", "failed", "cancelled", "not_started"]),
    deploys: z
      .array(z.object({ environment: z.string(), deploy_id: z.string(), status: z.string() }))
      .describe("the deploys the stage ran (GET /api/v1/deploys/{id} for each)"),
    promoted_by: z.string().nullable(),
    promoted_at: z.string().nullable(),
    approvals: z.array(approvalSchema),
    soak_since: z.string().nullable(),
    soak_until: z.string().nullable(),
    measurements: z.array(measurementSchema),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    message: z.string().nullable().describe("why the stage failed or was cancelled"),
    done_by: z
      .string()
      .nullable()
      .optional()
      .describe(
        "on a retry (`manent release retry`), a stage the retried release had passed: the release that deployed it (its deploys, soak and approvals are that release's); not deployed again",
      ),
  })
  .openapi("ReleaseStage");

export const releaseSummarySchema = z
  .object({
    id: z.string(),
    tenant: z.string(),
    application: z.string(),
    artifact: z.string(),
    version: z.string(),
    sha256: z.string().nullable().describe("the sha256 every stage deploys; null until pinned"),
    source: z.string(),
    status: releaseStatus,
    pipeline_file: z.string(),
    environments: z.array(z.string()).describe("every environment of its pipeline, in order"),
    current_stage: z.number().int().nullable(),
    waiting: waitingSchema.nullable().describe("what the release waits for, and how to go on"),
    error: errorJsonSchema.nullable(),
    submitted_by: z.string().nullable(),
    submitted_by_id: z.string().nullable(),
    cancel_requested_by: z.string().nullable(),
    retry_of: z.string().nullable().describe("the release this one retries (`manent release retry`); null when it is not a retry"),
    created_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .openapi("ReleaseSummary");

export const releaseSchema = releaseSummarySchema
  .extend({
    pipeline: z.object({ stages: z.array(z.record(z.string(), z.unknown())) }).describe("the pipeline as it was when the release started"),
    stages: z.array(stageSchema),
    retried_by: z.array(z.string()).describe("the retries of this release (`manent release retry`), oldest first"),
  })
  .openapi("Release");

export const releaseRetriedSchema = z
  .object({
    id: z.string().describe("the new release"),
    status: z.literal("running"),
    retry_of: z.string().describe("the release it retries"),
    from_stage: z.number().int().describe("the 1-based stage it starts at: the one where the retried release stopped"),
  })
  .openapi("ReleaseRetried");

export const releaseAnswerSchema = releaseSchema
  .extend({ message: z.string().optional().describe("what the command does (cancel)") })
  .openapi("ReleaseAnswer");

export const releaseListQuery = (nameQuery: z.ZodType<string | undefined>) =>
  z.object({
    tenant: nameQuery.describe("only this tenant (a caller sees only what its grants let it read)"),
    application: nameQuery,
    status: releaseStatus.optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(50),
  });
