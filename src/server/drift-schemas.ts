import { z } from "@hono/zod-openapi";
import { envconfigOriginSchema } from "./api-schemas.js";

/** Drift as the API answers it (GET /api/v1/drift, POST /api/v1/drift/checks). */

export const driftChangeSchema = z
  .object({
    object: z.string().describe("what differs: `Deployment/hello`, `ConfigMap/hello-config`, a file of the release, `current`, `release`"),
    field: z.string().describe('where in it: `spec.replicas`, `data.greeting`, `sha256`, `version`; "" for the whole object'),
    expected: z.string().describe('the recorded release\'s value ("" when it has none: an added file)'),
    live: z.string().describe('what runs there now ("" when nothing does: a deleted object or file)'),
  })
  .openapi("DriftChange");

export const ignoredChangeSchema = z
  .object({
    ...driftChangeSchema.shape,
    reason: z
      .string()
      .describe(
        "why it is not drift: `drift.ignore.0`, `manager kube-controller-manager (drift.ignore.1)`, `HorizontalPodAutoscaler/hello`",
      ),
  })
  .openapi("IgnoredDriftChange");

export const driftTargetSchema = z
  .object({
    tenant: z.string(),
    application: z.string(),
    artifact: z.string(),
    environment: z.string(),
    target: z.string().describe("the target, by its identity: its envconfig name, else its host"),
    state: z
      .enum(["in_sync", "drifted", "unknown", "error"])
      .describe("unknown: the plugin cannot tell (an older plugin without the drift call; `reason` says why); error: the check failed"),
    deploy_id: z.string().describe("the deploy whose release the target was compared with (the last that succeeded)"),
    plugin: z.string(),
    expected_version: z.string().describe("the recorded release"),
    live_version: z.string().describe('the release the target runs now, as the plugin tells it ("" when unknown or none)'),
    changes: z.array(driftChangeSchema),
    ignored: z
      .array(ignoredChangeSchema)
      .describe("differences found but not counted as drift: fields the envconfig's drift.ignore, or an autoscaler, leaves to others"),
    reason: z.string().nullable(),
    checked_at: z.string(),
    changed_at: z.string().describe("when the state or the changes last changed"),
  })
  .openapi("TargetDrift");

export const driftReportSchema = z
  .object({
    tenant: z.string(),
    application: z.string(),
    artifact: z.string(),
    environment: z.string(),
    deploy_id: z.string(),
    plugin: z.string(),
    expected_version: z.string(),
    targets: z.array(driftTargetSchema),
    envconfig: z
      .object({
        deployed: envconfigOriginSchema
          .nullable()
          .describe("where the release's envconfig came from (null: none, or recorded before manent kept it)"),
        current: envconfigOriginSchema.nullable().describe("where a deploy submitted now reads it"),
        changes: z
          .array(
            z
              .object({
                field: z
                  .string()
                  .describe("dotted: `params.replicas`, `targets.web-3.host` (targets by identity), `rollout.canary.steps.1.set_weight`"),
                deployed: z.string().describe('what the release ran ("" for none)'),
                current: z.string().describe('what a deploy now would run ("" for none)'),
              })
              .openapi("EnvconfigChange"),
          )
          .nullable()
          .describe("the settings a new deploy would change, [] for none; null when the release's deploy recorded none to compare with"),
      })
      .describe("the envconfig change a new deploy of the release would bring")
      .openapi("EnvconfigComparison"),
  })
  .openapi("DriftReport");
