import { z } from "zod";
import { byteSize } from "./artifacts-config.js";
import { durationMs } from "./duration.js";

const tenantName = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

const retentionDefaults = { keep_releases: 3, min_age: 3_600_000, sweep_interval: 3_600_000 };

/**
 * How much each tenant may keep uploaded and when uploads go (`uploads` in manent.yml). An upload
 * is *needed* while a queued or running deploy names it, or while it is the artifact of one of the
 * last `keep_releases` versions released in one of its tenant's application/artifact/environment;
 * a needed upload is never removed, by a sweep or by hand.
 */
export const uploadsConfigSchema = z
  .strictObject({
    quota_per_tenant: byteSize.optional().meta({
      description: "Total size of the uploads each tenant may keep; an upload that would go over it is refused (413). Absent: no quota",
      examples: ["2GiB"],
    }),
    tenant_quotas: z
      .record(z.string().max(63).regex(tenantName, { message: "tenant names are lower-case letters, digits, '.', '_' or '-'" }), byteSize)
      .default({})
      .meta({
        description: "A quota for some tenants instead of quota_per_tenant, by tenant name",
        examples: [{ "team-a": "5GiB" }],
      }),
    retention: z
      .strictObject({
        keep_releases: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .default(retentionDefaults.keep_releases)
          .describe(
            "How many of the last versions released in each application/artifact/environment keep their uploads, so a rollback or a redeploy of them finds their file (default 3)",
          ),
        min_age: durationMs
          .default(retentionDefaults.min_age)
          .describe(
            "A sweep leaves an upload younger than this (since it was uploaded or last named by a submission), so one uploaded for a deploy about to be submitted stays (default 1h)",
          ),
        sweep_interval: durationMs
          .default(retentionDefaults.sweep_interval)
          .describe(
            "How often each server removes the uploads no deploy needs any more (default 1h; 0: only on demand, manent uploads sweep)",
          ),
      })
      .default(retentionDefaults)
      .describe("When uploads no deploy needs any more are removed"),
  })
  .default({ tenant_quotas: {}, retention: retentionDefaults })
  .describe("Quotas of clients' uploads per tenant, and their retention");

export type UploadsConfig = z.output<typeof uploadsConfigSchema>;

/** A tenant's upload quota in bytes, or undefined for none. */
export function uploadQuota(config: UploadsConfig, tenant: string): number | undefined {
  return config.tenant_quotas[tenant] ?? config.quota_per_tenant;
}
