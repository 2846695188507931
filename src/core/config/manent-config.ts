import { z } from "zod";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";

const databaseUrl = z.string().superRefine((url, ctx) => {
  if (/^postgres(ql)?:\/\//.test(url)) return;
  const scheme = /^([a-z0-9+.-]+):/i.exec(url)?.[1] ?? url;
  ctx.addIssue({
    code: "custom",
    message:
      `"${scheme}" is not supported: manent stores deploys with DBOS Transact on Postgres. ` +
      `Write database_url: postgres://user:password@host:5432/dbname for an existing server, ` +
      `or remove database_url to use the embedded Postgres under workdir`,
  });
});

export const externalSchema = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: "must be 64 lower-case hex digits" })
    .optional(),
  env: z.record(z.string(), z.string()).default({}),
  start_timeout: durationMs.default(60_000),
});
export type ExternalSpec = z.output<typeof externalSchema>;

/** A `plugins.<name>` entry: `external` marks an external binary; every other key is the plugin's own configuration. */
const pluginEntry = z.looseObject({ external: externalSchema.optional() }).nullable().transform((v) => v ?? {});

const fileProvider = z.strictObject({
  name: z.string().min(1),
  type: z.literal("file"),
  file: z.strictObject({
    path: z
      .string()
      .refine((p) => p.includes("{application}") && p.includes("{environment}"), {
        message: "must contain {application} and {environment} (and usually {tenant} and {artifact})",
      }),
  }),
});

const token = z
  .strictObject({
    name: z.string().min(1),
    /** The tenant this token may see, or "*" for every tenant. */
    tenant: z.string().min(1),
    /** Where the token's value is read: `env:NAME` or `file:/path`. */
    token: secretRefSchema.optional(),
    /** Hex sha256 of the token, when the value itself is not kept on the server. */
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
  })
  .refine((t) => (t.token === undefined) !== (t.sha256 === undefined), { message: "give exactly one of token or sha256" });

/** The server's configuration (`manent.yml`). */
export const manentConfigSchema = z.strictObject({
  dbos: z
    .strictObject({
      database_url: databaseUrl.optional(),
      /** Identifies this server among several sharing one database; recovery resumes its own workflows. */
      executor_id: z.string().min(1).optional(),
    })
    .default({}),
  workdir: z.string().min(1).default("./work"),
  listen: z
    .string()
    .regex(/^[^:]*:\d+$/, { message: 'must be "host:port", e.g. 127.0.0.1:8080' })
    .default("127.0.0.1:8080"),
  plugins: z.record(z.string().regex(/^[a-z0-9][a-z0-9-]*$/, { message: "plugin names are lower-case letters, digits and '-'" }), pluginEntry).default({}),
  envconfig: z
    .strictObject({
      required: z.boolean().default(true),
      providers: z.array(fileProvider).default([]),
    })
    .default({ required: true, providers: [] }),
  auth: z.strictObject({ tokens: z.array(token).default([]) }).default({ tokens: [] }),
  /** How many deploys one server runs at once. */
  concurrency: z.number().int().min(1).max(1000).default(50),
  /** How long a shutdown waits for running steps. */
  shutdown_timeout: durationMs.default(60_000),
});

export type ManentConfig = z.output<typeof manentConfigSchema>;
export type PluginEntry = z.output<typeof pluginEntry>;
