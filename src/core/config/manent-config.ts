import { z } from "zod";
import { artifactsConfigSchema } from "./artifacts-config.js";
import { authConfigSchema } from "./auth-config.js";
import { databaseUrlSchema } from "./database-url.js";
import { durationMs } from "./duration.js";
import { gitProvider } from "./git-provider-config.js";
import { tlsConfigSchema } from "./tls-config.js";
import { uploadsConfigSchema } from "./uploads-config.js";
import { retentionConfigSchema } from "./retention-config.js";
import { verificationConfigSchema } from "./verification-config.js";
import { deployWindowsConfigSchema } from "./deploy-windows-config.js";
import { notificationsConfigSchema } from "./notifications-config.js";
import { secretStoresConfigSchema } from "./secret-stores-config.js";
import { defaultConnections, minConnections } from "./database-connections.js";

export const externalSchema = z.strictObject({
  command: z
    .string()
    .min(1)
    .meta({
      description: "The plugin binary (relative to the server's working directory); manent runs a private copy of it",
      examples: ["/opt/manent/plugins/my-plugin"],
    }),
  args: z.array(z.string()).default([]).describe("Arguments of the command"),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: "must be 64 lower-case hex digits" })
    .optional()
    .describe("Expected sha256 of the binary; a binary that differs is refused"),
  env: z
    .record(z.string(), z.string())
    .default({})
    .describe("Environment variables of the plugin process; of the server's own it inherits only PATH, HOME, TMPDIR, TZ and LANG"),
  start_timeout: durationMs.default(60_000).describe("How long the plugin may take to start and answer the handshake"),
  supervision: z
    .strictObject({
      ping_interval: durationMs.optional().describe("How often the plugin's health is checked (default 1s)"),
      ping_timeout: durationMs.optional().describe("How long one health check may take (default 1s)"),
      max_ping_failures: z
        .number()
        .int()
        .min(1)
        .optional()
        .describe("Failed health checks in a row after which the plugin is declared hung, killed and restarted (default 2)"),
      max_restart_attempts: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe("Failed starts or crashes in a row tolerated before the supervisor gives up (default 5)"),
      restart_backoff: durationMs.optional().describe("Delay before the first restart, doubled per failure in a row (default 1s)"),
      max_backoff: durationMs.optional().describe("Longest delay between restarts (default 30s)"),
      health_reset_threshold: z.number().int().min(1).optional().describe("Healthy checks in a row that forget past failures (default 30)"),
      cooldown: durationMs
        .optional()
        .describe("After giving up, how long before the supervisor tries again by itself (default 5m; 0: never)"),
    })
    .default({})
    .describe("Health checks and restarts of the plugin process; the defaults find a hung plugin within 5 s"),
});
export type ExternalSpec = z.output<typeof externalSchema>;

/** A `plugins.<name>` entry: `external` marks an external binary; every other key is the plugin's own configuration. */
const pluginEntry = z
  .looseObject({ external: externalSchema.optional().describe("Marks an external plugin binary, spoken to over go-plugin gRPC") })
  .nullable()
  .transform((v) => v ?? {});

const fileProvider = z.strictObject({
  name: z.string().min(1).describe("The provider's name, for messages"),
  type: z.literal("file").describe("Envconfigs are YAML files"),
  file: z
    .strictObject({
      path: z
        .string()
        .refine((p) => p.includes("{application}") && p.includes("{environment}"), {
          message: "must contain {application} and {environment} (and usually {tenant} and {artifact})",
        })
        .meta({
          description:
            "Where an envconfig is, relative to the server's working directory; {tenant}, {application}, {artifact} and {environment} are replaced",
          examples: ["./envconfig/{tenant}/{application}/{artifact}/{environment}.yml"],
        }),
    })
    .describe("The file provider's settings"),
});

/** The server's configuration (`manent.yml`). */
export const manentConfigSchema = z.strictObject({
  // `dbos:` written with no value (as the tutorial does) means the defaults: the embedded Postgres.
  dbos: z.preprocess(
    (v) => (v === null ? undefined : v),
    z
      .strictObject({
        database_url: databaseUrlSchema.optional().meta({
          description:
            "The Postgres that keeps deploys and workflows, or where its URL is kept (env:NAME, file:/path); absent: an embedded Postgres under workdir",
          examples: ["postgres://manent:secret@db:5432/manent", "env:MANENT_DATABASE_URL"],
        }),
        executor_id: z
          .string()
          .min(1)
          .optional()
          .meta({
            description: 'Identifies this server among several sharing one database; recovery resumes its own workflows (default "local")',
            examples: ["worker-1"],
          }),
        connections: z
          .number()
          .int()
          .min(minConnections)
          .max(1000)
          .default(defaultConnections)
          .describe(
            "The most connections this server opens to Postgres for its work, and one more for its event hub's listener: a third for the workflow engine (its own listener among them), the rest for deploy records and the API. A fleet's servers together stay under Postgres's max_connections (docs/operations/several-servers.md)",
          ),
        heartbeat_interval: durationMs
          .default(5_000)
          .describe("How often this server records that it is alive in Postgres, so the others of its fleet notice when it dies"),
        dead_after: durationMs
          .default(30_000)
          .describe(
            "A server of the fleet whose last heartbeat is older than this is dead: one live server takes over its pending deploys",
          ),
      })
      .default({ connections: defaultConnections, heartbeat_interval: 5_000, dead_after: 30_000 })
      .describe("The durable workflow engine (DBOS Transact); absent or empty: the embedded Postgres"),
  ),
  workdir: z
    .string()
    .min(1)
    .default("./work")
    .describe(
      "The artifacts cache, the embedded Postgres and the private copies of external plugin binaries, relative to the working directory",
    ),
  listen: z
    .string()
    // An IPv6 address in brackets, as in a URL ([::1]:8080); a host name or IPv4 address as it is.
    .regex(/^(\[[0-9A-Fa-f:.]+\]|[^:[\]]*):\d{1,5}$/, { message: 'must be "host:port", e.g. 127.0.0.1:8080 or [::1]:8080' })
    .refine((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, { message: "the port must be at most 65535" })
    .default("127.0.0.1:8080")
    .describe(
      "Address of the HTTP API (`manent-server serve --listen` overrides it); an address other than loopback needs `tls` (cert_file, or behind_proxy)",
    ),
  tls: tlsConfigSchema,
  plugins: z
    .record(z.string().regex(/^[a-z0-9][a-z0-9-]*$/, { message: "plugin names are lower-case letters, digits and '-'" }), pluginEntry)
    .default({})
    .meta({
      description:
        "The plugins this server offers, by name: a built-in's name configures it; an entry with `external` is an external binary. Other keys are the plugin's own configuration",
      examples: [{ "remote-copy": {}, kubernetes: {} }],
    }),
  envconfig: z
    .strictObject({
      required: z
        .boolean()
        .default(true)
        .describe("Refuse a deploy whose envconfig no provider has (false: deploy with an empty envconfig)"),
      providers: z
        .array(z.discriminatedUnion("type", [fileProvider, gitProvider]))
        .default([])
        .describe("Where envconfigs are looked up, in order; the first that has one wins"),
    })
    .default({ required: true, providers: [] })
    .describe("Where each deploy's envconfig comes from"),
  auth: authConfigSchema,
  artifacts: artifactsConfigSchema,
  verification: verificationConfigSchema,
  uploads: uploadsConfigSchema,
  retention: retentionConfigSchema,
  deploy_windows: deployWindowsConfigSchema,
  notifications: notificationsConfigSchema,
  secret_stores: secretStoresConfigSchema,
  concurrency: z
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(50)
    .describe(
      "How many deploys one server runs their steps at once; a deploy waiting (a pause, an approval, a soak, an analysis interval) holds none, and free slots go to the tenant holding the fewest",
    ),
  tenant_share: z
    .number()
    .gt(0)
    .max(1)
    .default(1)
    .describe(
      "The share of concurrency one tenant's deploys may hold at once (at least one slot), so the rest is there for other tenants however long its deploys run; e.g. 0.8 on a server several tenants share (default 1: no limit, a tenant alone uses every slot)",
    ),
  max_waiting: z
    .number()
    .int()
    .min(0)
    .max(100_000)
    .default(1000)
    .describe(
      "How many deploys one server holds besides those running: waiting durably, or for a slot of concurrency; more stay queued in the database for any server",
    ),
  shutdown_timeout: durationMs.default(60_000).describe("How long a shutdown waits for running steps"),
});

export type ManentConfig = z.output<typeof manentConfigSchema>;
export type PluginEntry = z.output<typeof pluginEntry>;
