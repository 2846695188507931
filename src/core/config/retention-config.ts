import { z } from "zod";
import { durationMs } from "./duration.js";

const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` })
    .default("*");

const keep = (what: string) =>
  z
    .strictObject({
      keep_last: z.number().int().min(1).max(1_000_000).optional().describe(`How many of the newest ${what} to keep whatever their age`),
      keep_for: durationMs
        .refine((ms) => ms >= 60_000, { message: "must be at least 1m" })
        .optional()
        .describe(`How long to keep ${what} whatever their number`),
    })
    .refine((k) => k.keep_last !== undefined || k.keep_for !== undefined, {
      message: "needs keep_last, keep_for or both (without either, leave the policy out: everything is kept)",
    })
    .describe(
      `When ended ${what} are deleted: once they are both beyond the newest keep_last and older than keep_for (a bound left out holds nothing back)`,
    );

export const deployKeep = keep("deploys of an application/artifact/environment");
export const releaseKeep = keep("releases of an application");
export type Keep = z.output<typeof deployKeep>;

/**
 * How long manent keeps its history (`retention` in manent.yml). Without it nothing is deleted.
 * Whatever the policy, what is still needed is kept: a deploy or release in progress, the newest
 * deploy of each application/artifact/environment (its last outcome, which `manent retry` may
 * take again), the deploys of the versions a rollback returns to and a drift check compares with,
 * the stage deploys of a kept release, and the audit log until it is exported.
 */
export const retentionConfigSchema = z
  .strictObject({
    sweep_interval: durationMs
      .refine((ms) => ms === 0 || ms >= 10_000, { message: "must be 0 (no sweep) or at least 10s" })
      .default(3_600_000)
      .describe(
        "How often one server of the fleet (whichever takes the sweep's lease) deletes what the policy lets go (default 1h; 0: never)",
      ),
    deploys: deployKeep.optional(),
    releases: releaseKeep.optional(),
    rules: z
      .array(
        z.strictObject({
          tenant: pattern("tenant").describe("The tenants the rule is for"),
          application: pattern("application").describe("The applications the rule is for"),
          environment: pattern("environment").describe("The environments the rule is for (deploys only; a release spans environments)"),
          deploys: deployKeep.optional(),
          releases: releaseKeep.optional(),
        }),
      )
      .max(1000)
      .default([])
      .describe(
        "Policies for some tenants, applications or environments instead of deploys and releases above; the first rule that matches wins",
      ),
    audit: z
      .strictObject({
        keep_for: durationMs
          .refine((ms) => ms >= 86_400_000, { message: "must be at least 1d" })
          .describe("How long audit entries stay in the database"),
        export_dir: z
          .string()
          .min(1)
          .describe(
            "Where older entries are written (JSON lines, a file per batch of up to 5,000, relative to manent.yml's directory) before they are deleted from the database; a sweep that cannot write there deletes nothing",
          ),
      })
      .optional()
      .describe("The audit log's own retention: entries older than keep_for are exported, then deleted"),
  })
  .default({ sweep_interval: 3_600_000, rules: [] })
  .describe("How long deploys, releases and the audit log are kept (absent: forever)");

export type RetentionConfig = z.output<typeof retentionConfigSchema>;
