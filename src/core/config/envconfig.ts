import { z } from "zod";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";

/** Phases of a deploy whose retries can be set per step. */
export const retryableSteps = ["fetch", "validate", "checkpoint", "deploy", "rollback"] as const;
export type RetryableStep = (typeof retryableSteps)[number];

const paramValue = z.union([z.string(), z.number(), z.boolean()]).transform(String);

const stepSettings = z.strictObject({
  max_retries: z.number().int().min(0).max(100).optional(),
  timeout: durationMs.optional(),
});

export const callbackEvents = ["started", "succeeded", "failed", "rolled_back"] as const;
export type CallbackEvent = (typeof callbackEvents)[number];

const callbackSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, message: "must be an http(s) URL" }),
  events: z.array(z.enum(callbackEvents)).min(1).default([...callbackEvents]),
  max_retries: z.number().int().min(0).max(20).default(3),
  timeout: durationMs.default(10_000),
});

/** How to deploy in one environment (`envconfig/{tenant}/{application}/{artifact}/{environment}.yml`). */
export const envconfigSchema = z.strictObject({
  plugin: z.string().min(1).optional(),
  targets: z
    .array(
      z.strictObject({
        host: z.string().min(1),
        port: z.number().int().min(1).max(65535).optional(),
        labels: z.record(z.string(), z.string()).default({}),
      }),
    )
    .default([]),
  params: z.record(z.string(), paramValue).default({}),
  secrets: z
    .array(z.strictObject({ name: z.string().min(1), ref: secretRefSchema }))
    .default([])
    .refine((list) => new Set(list.map((s) => s.name)).size === list.length, { message: "secret names must be unique" }),
  rollback: z.strictObject({ enabled: z.boolean().default(false) }).default({ enabled: false }),
  /** Default retries of every step; `steps.<name>.max_retries` overrides it. */
  max_retries: z.number().int().min(0).max(100).default(2),
  /** First wait between retries; doubles at each attempt. */
  retry_interval: durationMs.default(1000),
  steps: z.partialRecord(z.enum(retryableSteps), stepSettings).default({}),
  /** How many targets are deployed at once. */
  parallel: z.number().int().min(1).max(1000).default(1),
  callbacks: z.array(callbackSchema).default([]),
});

export type Envconfig = z.output<typeof envconfigSchema>;
export type Callback = Envconfig["callbacks"][number];
