import { isAbsolute, normalize, resolve } from "node:path";
import { z } from "zod";
import { durationMs } from "../config/duration.js";
import type { LoadedConfig } from "../config/index.js";
import { loadYamlFile } from "../config/yaml-file.js";
import { Code, ManentError } from "../errors.js";
import { approversSchema, formatMs } from "../rollout/rollout-config.js";

/*
 * An application's path through its environments, `pipeline.yml` beside its envconfigs
 * (envconfig/{tenant}/{application}/pipeline.yml with the default provider path):
 *
 *   stages:
 *     - environment: dev                      # deployed as soon as the release starts
 *     - environment: staging
 *       soak: 10m                             # after the deploy succeeded, wait 10m before going on
 *       analysis: {checks: [error-rate]}      # then run checks of staging's envconfig `analysis.checks`
 *     - environments: [prod-eu, prod-us]      # deployed side by side
 *       promotion: manual                     # waits for `manent release promote ID --to prod-eu`
 *       approval:                             # and for approvals (four eyes), before anything is deployed
 *         approvers: {count: 1, from_groups: [release-managers], allow_submitter: false}
 *         timeout: 24h
 *
 * A stage's order: promotion (manual), approval, deploy, soak, analysis.
 */

const name = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, { message: "must be lower-case letters, digits, '.', '_' or '-'" });

const stageSchema = z
  .strictObject({
    environment: name.optional().describe("The environment this stage deploys to (or `environments` for several side by side)"),
    environments: z
      .array(name)
      .min(1)
      .max(20)
      .optional()
      .describe("Environments deployed side by side in this stage; the stage fails when one of them fails"),
    promotion: z
      .enum(["auto", "manual"])
      .default("auto")
      .describe("auto: deployed once the stage before has passed; manual: waits for `manent release promote ID --to ENV`"),
    approval: z
      .strictObject({
        approvers: approversSchema.optional(),
        timeout: durationMs.optional().describe("Fail the release when the approvals did not come within this time"),
      })
      .optional()
      .describe("Wait for `manent release approve ID` before this stage is deployed"),
    soak: durationMs
      .refine((ms) => ms <= 30 * 24 * 3_600_000, { message: "must be at most 720h" })
      .optional()
      .describe("How long the stage must run well after its deploy before the release goes on (e.g. 30m); kept across restarts"),
    analysis: z
      .strictObject({
        checks: z
          .array(z.string().min(1).max(100))
          .min(1)
          .max(20)
          .describe("Names of checks in each environment's envconfig `analysis.checks`"),
      })
      .optional()
      .describe("Checks run after the soak (the rollout's analysis format); a failed check fails the release"),
  })
  .superRefine((s, ctx) => {
    if ((s.environment === undefined) === (s.environments === undefined)) {
      ctx.addIssue({ code: "custom", message: "give either environment or environments", path: ["environment"] });
    }
  })
  .transform(({ environment, environments, ...rest }) => ({ environments: environments ?? [environment!], ...rest }));

export const pipelineSchema = z
  .strictObject({
    stages: z.array(stageSchema).min(1).max(20).describe("The environments a release goes through, in order"),
  })
  .superRefine((p, ctx) => {
    const seen = new Map<string, number>();
    p.stages.forEach((s, i) =>
      s.environments.forEach((env, j) => {
        const before = seen.get(env);
        if (before !== undefined) {
          ctx.addIssue({
            code: "custom",
            message: `environment ${env} is already in stage ${before + 1}`,
            path: ["stages", i, "environments", j],
          });
        }
        seen.set(env, i);
      }),
    );
  })
  .describe("An application's path through its environments (pipeline.yml)");

export type Pipeline = z.output<typeof pipelineSchema>;
export type Stage = Pipeline["stages"][number];

/** Every environment of a pipeline, in order. */
export function pipelineEnvironments(p: Pipeline): string[] {
  return p.stages.flatMap((s) => s.environments);
}

/** "staging (soak 5m, analysis error-rate)". */
export function describeStage(s: Stage): string {
  const parts = [
    s.promotion === "manual" && "manual promotion",
    s.approval && "approval",
    s.soak !== undefined && `soak ${formatMs(s.soak)}`,
    s.analysis && `analysis ${s.analysis.checks.join(", ")}`,
  ].filter(Boolean);
  return `${s.environments.join(" + ")}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

/**
 * Where an application's pipeline.yml is for each envconfig file provider: the directory its path
 * has for the application, before the part that names the artifact or the environment.
 */
export function pipelinePaths(config: LoadedConfig, tenant: string, application: string): string[] {
  return config.envconfig.providers.flatMap((provider) => {
    // Pipelines are read from file providers only (a git provider's pipeline.yml is not read yet).
    if (provider.type !== "file") return [];
    const pattern = provider.file.path;
    const cut = pattern.search(/\{(artifact|environment)\}/);
    const head = cut < 0 ? pattern.slice(0, pattern.lastIndexOf("/") + 1) : pattern.slice(0, cut);
    // A name such as "{application}-{environment}.yml" has no directory of its own for the application.
    if (!head.endsWith("/") || !head.includes("{application}")) return [];
    return [normalize(`${head.replace(/\{tenant\}/g, tenant).replace(/\{application\}/g, application)}pipeline.yml`)];
  });
}

/** The application's pipeline: the first provider's pipeline.yml that exists; invalid_argument naming file, field and reason. */
export async function findPipeline(
  config: LoadedConfig,
  tenant: string,
  application: string,
): Promise<{ pipeline: Pipeline; file: string }> {
  const paths = pipelinePaths(config, tenant, application);
  for (const path of paths) {
    const file = isAbsolute(path) ? path : resolve(config.baseDir, path);
    try {
      return { pipeline: await loadYamlFile(file, pipelineSchema, path), file: path };
    } catch (err) {
      if (err instanceof ManentError && err.code === Code.NotFound) continue;
      throw err;
    }
  }
  throw new ManentError(
    Code.InvalidArgument,
    `no pipeline for ${tenant}/${application}: ` +
      (paths.length
        ? `none of ${paths.join(", ")} exists (a release follows the stages its pipeline.yml lists)`
        : `no envconfig provider of ${config.file} has a directory per application to hold a pipeline.yml`),
    { details: { file: paths[0] ?? config.file } },
  );
}
