import { z } from "zod";
import { driftIgnoreSchema } from "./drift-ignore.js";
import { durationMs } from "./duration.js";
import { deploySecretRefSchema } from "./store-secret-ref.js";
import { analysisSectionSchema } from "../rollout/analysis/index.js";
import { rolloutSchema } from "../rollout/rollout-config.js";

/** Phases of a deploy whose retries can be set per step. */
export const retryableSteps = ["fetch", "validate", "checkpoint", "deploy", "rollback"] as const;
export type RetryableStep = (typeof retryableSteps)[number];

const paramValue = z.union([z.string(), z.number(), z.boolean()]).transform(String);

const stepSettings = z.strictObject({
  max_retries: z.number().int().min(0).max(100).optional().describe("Retries of this step (default: the envconfig's max_retries)"),
  timeout: durationMs
    .optional()
    .meta({ description: "Longest time one attempt of this step may take; a step that runs out is retried", examples: ["5m"] }),
});

/** A deploy's events, which a callback gets by default. */
export const deployEvents = ["started", "succeeded", "failed", "rolled_back"] as const;
/** `drifted`: a periodic drift check found targets that no longer run what was deployed (listed explicitly). */
export const callbackEvents = [...deployEvents, "drifted"] as const;
export type CallbackEvent = (typeof callbackEvents)[number];

const callbackSchema = z.strictObject({
  url: z
    .url({ protocol: /^https?$/, message: "must be an http(s) URL" })
    .meta({ description: "Where the event is POSTed as JSON", examples: ["https://ci.example.com/hooks/manent"] }),
  events: z
    .array(z.enum(callbackEvents))
    .min(1)
    .default([...deployEvents])
    .describe("The events that call this URL (default: the deploy's four; `drifted` only when listed)"),
  max_retries: z.number().int().min(0).max(20).default(3).describe("Retries of a call that failed (a 5xx, a refused connection)"),
  timeout: durationMs.default(10_000).describe("Longest time one call may take"),
});

/**
 * Two targets with one identity (the name, else the host) would be one target to the engine: its
 * results, resume and rollback are keyed by it, so the second would be skipped. Refused, naming both.
 */
function refuseSharedIdentity(targets: { name?: string | undefined; host: string }[], ctx: z.RefinementCtx): void {
  const seen = new Map<string, number>();
  for (const [i, t] of targets.entries()) {
    const id = t.name ?? t.host;
    const first = seen.get(id);
    if (first === undefined) {
      seen.set(id, i);
      continue;
    }
    const other = targets[first]!;
    const what =
      t.name !== undefined && other.name !== undefined
        ? `name ${id}`
        : t.name === undefined && other.name === undefined
          ? `host ${id}`
          : `identity ${id}`;
    ctx.addIssue({
      code: "custom",
      path: [i],
      message: `same identity as targets.${first} (${what}): give each a distinct name`,
    });
  }
}

/** How to deploy in one environment (`envconfig/{tenant}/{application}/{artifact}/{environment}.yml`). */
export const envconfigSchema = z.strictObject({
  plugin: z
    .string()
    .min(1)
    .optional()
    .meta({
      description: "The plugin that deploys (a manent.yml plugins name); absent: the one plugin whose supports() accepts the artifact",
      examples: ["remote-copy"],
    }),
  targets: z
    .array(
      z.strictObject({
        name: z
          .string()
          .regex(
            /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/,
            "must be letters, digits, '.', '_' or '-' (at most 253), starting with a letter or digit",
          )
          .optional()
          .meta({
            description:
              "The target's identity in this environment (default: its host): results, resume, waves and rollbacks name the target by it. Needed when two targets share a host (two clusters on one address with different ports)",
            examples: ["cluster-eu-1"],
          }),
        host: z
          .string()
          .min(1)
          .meta({ description: "The target: a host name or address, or a name the plugin understands", examples: ["web-1"] }),
        port: z
          .number()
          .int()
          .min(1)
          .max(65535)
          .optional()
          .describe("The target's port, when the plugin connects to one (SSH, a Kubernetes API)"),
        labels: z
          .record(z.string(), z.string())
          .default({})
          .meta({ description: "Free labels, passed to the plugin (e.g. region, az)", examples: [{ region: "eu-1", az: "a" }] }),
      }),
    )
    .default([])
    .superRefine(refuseSharedIdentity)
    .describe(
      "Where to deploy: each target is a host, a cluster… as the plugin understands it. Each has one identity, its `name` or else its host, unique in the list",
    ),
  params: z
    .record(z.string(), paramValue)
    .default({})
    .meta({
      description: "The plugin's parameters (strings; numbers and booleans are converted). `var.NAME` keys are substitution variables",
      examples: [{ transport: "local", base: "/srv/hello", "var.REPLICAS": "2" }],
    }),
  secrets: z
    .array(
      z.strictObject({
        name: z
          .string()
          .min(1)
          .meta({ description: "The name the plugin asks for", examples: ["kube-token"] }),
        ref: deploySecretRefSchema.meta({
          description:
            "Where the value is read, only during the plugin call that asks for it: a file, a variable of the server's environment, a Vault KV v2 key or a Kubernetes Secret's key (the stores of secret_stores in manent.yml, within the paths allowed to the tenant)",
          examples: ["file:/etc/manent/kube-token", "env:DEPLOY_KEY", "vault:secret/team-a/db#password", "k8s:team-a-secrets/db#password"],
        }),
      }),
    )
    .default([])
    .refine((list) => new Set(list.map((s) => s.name)).size === list.length, { message: "secret names must be unique" })
    .describe("Secrets the plugin may ask for; values are never stored, logged or returned"),
  rollback: z
    .strictObject({ enabled: z.boolean().default(false).describe("Roll a failed deploy back to the releases the checkpoint recorded") })
    .default({ enabled: false })
    .describe("Automatic rollback"),
  max_retries: z
    .number()
    .int()
    .min(0)
    .max(100)
    .default(2)
    .describe("Retries of every step after its first attempt; steps.<step>.max_retries overrides it"),
  retry_interval: durationMs.default(1000).describe("First wait between retries; it doubles at each attempt"),
  steps: z
    .partialRecord(z.enum(retryableSteps), stepSettings)
    .default({})
    .meta({ description: "Per-step retries and timeouts", examples: [{ deploy: { max_retries: 0, timeout: "10m" } }] }),
  parallel: z
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(1)
    .describe("How many targets are deployed at once, by plugins that declare parallel targets"),
  callbacks: z.array(callbackSchema).default([]).describe("Webhooks called when a deploy starts and ends"),
  analysis: analysisSectionSchema.optional(),
  rollout: rolloutSchema.optional(),
  drift: z
    .strictObject({
      interval: durationMs
        .refine((ms) => ms >= 1000, { message: "must be at least 1s" })
        .optional()
        .meta({
          description:
            "How often manent checks that the targets still run what it deployed (the plugin's drift call); absent: only on demand (`manent diff`)",
          examples: ["5m"],
        }),
      heal: z
        .boolean()
        .default(false)
        .describe(
          "When a periodic check finds drift, deploy the recorded release again (the same version and sha256), unless a deploy of it is queued or running or the last one failed",
        ),
      ignore: z
        .array(driftIgnoreSchema)
        .default([])
        .describe(
          "Fields manent leaves to others (an autoscaler, a controller, a webhook): not drift, and not changed by a deploy on a live object (kubernetes only)",
        ),
    })
    .default({ heal: false, ignore: [] })
    .describe("Drift: whether the targets still run what manent deployed, checked periodically, and healed (off by default)"),
  auto_deploy: z
    .boolean()
    .default(false)
    .describe(
      "From a git provider: when this file changes on the ref the provider tracks, deploy the release running here again with it (the same version and bytes, queued and rolled out like any deploy), once per new content; checked after every fetch",
    ),
});

export type Envconfig = z.output<typeof envconfigSchema>;
export type Callback = Envconfig["callbacks"][number];
