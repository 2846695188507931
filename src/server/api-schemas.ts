import { z } from "@hono/zod-openapi";
import { refineSafe, safeText, versionSchema } from "../core/config/index.js";
import { codeName, type Code } from "../core/errors.js";
import { httpStatus as httpStatusOf } from "./http-status.js";
import { rolloutViewSchema } from "./rollout-schemas.js";

/**
 * The HTTP API's request and response schemas. Requests are validated with them and the OpenAPI
 * document (`/api/v1/openapi.json`) is generated from them, so what is checked and what is
 * documented cannot drift apart.
 */

export const errorSchema = z
  .object({
    error: z.object({
      code: z.string().describe("snake_case gRPC-style code, e.g. invalid_argument, not_found, permission_denied"),
      message: z.string(),
      details: z.record(z.string(), z.string()).optional().describe("machine-readable facts: file, field, plugin, target…"),
      request_id: z
        .string()
        .optional()
        .describe("the request's id, as in the X-Request-Id answer header and on the server's log lines of the request"),
    }),
  })
  .openapi("Error");

export const errorJsonSchema = z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.string()).optional() });

const deployKind = z.enum(["deploy", "dry_run", "rollback"]);
export const deployStatus = z.enum(["queued", "running", "succeeded", "failed", "rolled_back", "cancelled"]);

export const stepSchema = z
  .object({
    name: z.string(),
    status: z.enum(["running", "succeeded", "failed", "skipped"]),
    attempts: z.number().int(),
    started_at: z.string().nullable(),
    duration_ms: z.number().nullable(),
    output: z.object({ result: z.string().describe("the step's result as a JSON string") }).nullable(),
    error: errorJsonSchema.nullable(),
  })
  .openapi("Step");

export const targetSchema = z
  .object({
    phase: z.string(),
    host: z.string().describe("the target, by its identity: its envconfig name, else its host"),
    status: z.string(),
    duration_ms: z.number().nullable(),
    error: z.string().nullable(),
    details: z.record(z.string(), z.string()).nullable(),
  })
  .openapi("TargetProgress");

/** Where an envconfig came from: provider, path, content sha256 and, from git, the commit. */
export const envconfigOriginSchema = z
  .object({
    provider: z.enum(["file", "git"]),
    path: z.string().describe("the envconfig's path (for git: in the repository)"),
    sha256: z.string().describe("of the exact bytes read"),
    repository: z.string().optional().describe("git: the repository, without credentials"),
    ref: z.string().optional().describe("git: the ref tracked"),
    commit: z.string().optional().describe("git: the commit the envconfig was read at"),
  })
  .openapi("EnvconfigOrigin");

export const artifactVerificationSchema = z
  .object({
    policy: z.string().describe("the verification policy of manent.yml"),
    method: z
      .enum(["ssh", "sigstore", "cosign"])
      .describe("ssh: an OpenSSH signature; sigstore: a Sigstore bundle; cosign: a container image's cosign signature in its registry"),
    key: z
      .string()
      .describe(
        "the key that signed: an SSH key's fingerprint, a Sigstore public key's id and fingerprint, or `certificate SHA256:…` (a keyless certificate's fingerprint)",
      ),
    identity: z
      .string()
      .optional()
      .describe("ssh: the allowed_signers principal that signed; sigstore keyless: the certificate's subject alternative name"),
    issuer: z.string().optional().describe("sigstore keyless: the OIDC issuer the certificate names"),
    key_type: z.string().optional().describe("ssh: the key's type"),
    digest: z.string().describe("the bytes verified, sha256:<hex> (for cosign, the image's manifest digest)"),
    image: z.string().optional().describe("cosign: the container image, as the kubernetes manifests name it"),
  })
  .openapi("ArtifactVerification");

export const deploySummarySchema = z
  .object({
    id: z.string(),
    kind: deployKind,
    tenant: z.string(),
    application: z.string(),
    artifact: z.string(),
    environment: z.string(),
    version: z.string(),
    plugin: z.string().nullable(),
    status: deployStatus,
    error: errorJsonSchema.nullable(),
    submitted_by: z.string().nullable().describe("who submitted it: a person's e-mail (or subject) or a token's name"),
    submitted_by_id: z
      .string()
      .nullable()
      .describe(
        'the submitter\'s identity: "user:<subject>", "token:<name>" or "anonymous" (null for deploys recorded before it was kept)',
      ),
    retry_of: z.string().nullable().describe("the deploy this one retries (`manent retry`); null when it is not a retry"),
    envconfig: envconfigOriginSchema
      .nullable()
      .describe("where the envconfig this deploy runs came from, resolved once at submission; null when none was found"),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
  })
  .openapi("DeploySummary");

export const deployWaitingSchema = z
  .object({
    kind: z.literal("deploy_window").describe("held back by a deploy window or a freeze (deploy_windows in manent.yml)"),
    since: z.string(),
    until: z.string().nullable().describe("when it may run; null when no opening is found within a year"),
    rule: z.string().describe("the rule that keeps it out: `deny window NAME`, `freeze NAME: REASON`, `outside allow window NAME`"),
    hint: z.string().describe("`waiting for deploy window until <time> (<rule>)`"),
  })
  .openapi("DeployWaiting");

export const deploySchema = deploySummarySchema
  .extend({
    waiting: deployWaitingSchema.nullable().optional().describe("what the queued deploy waits for before it starts; null: nothing"),
    request: z.record(z.string(), z.unknown()).describe("what was submitted: descriptor, overrides, file names (never secret values)"),
    steps: z.array(stepSchema),
    targets: z.array(targetSchema),
    rollout: rolloutViewSchema.nullable().describe("waves and canary, for a deploy with rollout settings"),
    retried_by: z.array(z.string()).describe("the retries of this deploy (`manent retry`), oldest first"),
    verification: z
      .array(artifactVerificationSchema)
      .nullable()
      .describe(
        "what verified the artifact, one entry per verification policy of manent.yml that wanted a signature (the fetch step's output); null when none did or the artifact was not fetched",
      ),
  })
  .openapi("Deploy");

export const cancelledSchema = deploySchema
  .extend({
    cancel: z
      .object({
        outcome: z
          .enum(["cancelled", "requested"])
          .describe("cancelled: done at once (it was queued); requested: the running deploy takes it at its next step"),
        message: z
          .string()
          .describe("what the cancel does at the point the deploy was: stops before the deploy step, or rolls the targets back"),
      })
      .describe("a cancel after the deploy step has finished is refused (412 failed_precondition): roll back instead"),
  })
  .openapi("CancelledDeploy");

export const deployIdParams = z.object({
  id: z
    .string()
    .regex(/^[0-9a-f-]{36}$/, "not a deploy id")
    .openapi({ param: { name: "id", in: "path" }, example: "0b7f9a4c-2d1e-4f55-9d7a-2f6c1c0e8b11" }),
});

// Every string of a body is checked before it can reach Postgres, a path or a plugin: bounded, no NUL,
// control characters or lone surrogates. The descriptor's own fields are checked by its schema too.
export const descriptorObject = z.record(z.string(), z.unknown()).superRefine(refineSafe);
export const descriptorFile = z
  .string()
  .min(1)
  .max(256)
  .refine(safeText(256), { message: "must not contain NUL, control characters or lone surrogates" })
  .default("descriptor");
export const overrideText = (max: number) =>
  z.string().max(max).refine(safeText(max), { message: "must not contain NUL, control characters or lone surrogates" });

export const windowOverrideBodySchema = z
  .strictObject({
    reason: overrideText(500)
      .refine((s) => s.trim().length > 0, { message: "must say why" })
      .describe("why the deploy runs outside its deploy windows (kept in the audit log)"),
  })
  .openapi("WindowOverride");

export const submitBodySchema = z
  .strictObject({
    descriptor: descriptorObject.describe("the descriptor (apiVersion: manent/v1), as parsed from YAML"),
    descriptor_file: descriptorFile.describe("the descriptor's file name, used in error messages"),
    dry_run: z.boolean().default(false),
    overrides: z
      .strictObject({ version: overrideText(128).optional(), source: overrideText(4096).optional(), sha256: overrideText(64).optional() })
      .default({}),
    window_override: windowOverrideBodySchema
      .optional()
      .describe("run at once whatever the deploy windows and freezes say: admins only (the window_override permission), audited"),
  })
  .openapi("SubmitRequest");

export const driftCheckBodySchema = z
  .strictObject({
    descriptor: descriptorObject.describe("the descriptor naming the tenant, application, artifact and environment"),
    descriptor_file: descriptorFile.describe("the descriptor's file name, used in error messages"),
  })
  .openapi("DriftCheckRequest");

export const rollbackBodySchema = z
  .strictObject({
    descriptor: descriptorObject,
    descriptor_file: descriptorFile,
    to: versionSchema.optional().describe("the version to return to (default: the last good one before the current)"),
  })
  .openapi("RollbackRequest");

export const submittedSchema = z
  .object({
    id: z.string(),
    queued_behind: z.string().optional().describe("the deploy of the same application and environment this one waits for"),
    waiting: deployWaitingSchema.optional().describe("the deploy window it waits for before it starts, when one keeps it out now"),
    status: z.literal("queued"),
  })
  .openapi("Submitted");

/** `{"error": …}` responses for the given codes, keyed by their HTTP status. */
export function errorResponses(...codes: Code[]) {
  const out: Record<number, { description: string; content: { "application/json": { schema: typeof errorSchema } } }> = {};
  for (const code of codes) {
    const status = httpStatusOf(code);
    const prev = out[status]?.description;
    out[status] = {
      description: prev ? `${prev}, ${codeName(code)}` : codeName(code),
      content: { "application/json": { schema: errorSchema } },
    };
  }
  return out;
}
