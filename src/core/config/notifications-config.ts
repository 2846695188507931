import Mustache from "mustache";
import { z } from "zod";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";

/**
 * manent.yml's `notifications` section: channels (Slack, Microsoft Teams, e-mail, a generic
 * webhook) and the subscriptions of tenants to events. It lives in manent.yml, so only whoever
 * runs the server (its operator) configures it; no API role can change it. Every secret (a webhook
 * URL, an SMTP password) is a secret reference (env:NAME, file:/path), read at each delivery.
 */

/** The events a subscription can name. */
export const notificationEvents = ["started", "waiting", "succeeded", "failed", "rolled_back", "drifted"] as const;
export type NotificationEvent = (typeof notificationEvents)[number];

const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` });

/** A logic-less Mustache template, parsed when the file is loaded so a mistake stops the start, naming the field. */
const template = (description: string) =>
  z
    .string()
    .min(1)
    .max(8192)
    .superRefine((t, ctx) => {
      try {
        for (const span of Mustache.parse(t)) {
          if (span[0] === ">") ctx.addIssue({ code: "custom", message: "partials ({{> name}}) are not supported" });
        }
      } catch (err) {
        ctx.addIssue({ code: "custom", message: `not a valid template: ${(err as Error).message}` });
      }
    })
    .describe(description);

const eventTemplate = z
  .strictObject({
    subject: template("The title: an e-mail's Subject (line ends removed), a Teams card's title, a Slack message's first line").optional(),
    text: template("The message's text").optional(),
  })
  .describe("What one event's message says, as Mustache templates (variables in docs/operations/notifications.md)");

const templates = z
  .partialRecord(z.enum(notificationEvents), eventTemplate)
  .default({})
  .meta({
    description: "Templates per event replacing the defaults (either key may be left out)",
    examples: [{ failed: { subject: "{{application}} {{version}} failed in {{environment}}", text: "{{error}}" } }],
  });

const timeout = durationMs.default(10_000).describe("How long one delivery attempt may take");

const webhookUrl = secretRefSchema.meta({
  description:
    "Where the webhook URL is kept (env:NAME or file:/path; the URL is a secret: never logged or stored); the host must pass the artifacts address rules",
  examples: ["env:SLACK_WEBHOOK_URL"],
});

const slackChannel = z.strictObject({
  type: z.literal("slack").describe("A Slack incoming webhook: a JSON message with `text` and a section block"),
  url: webhookUrl,
  templates,
  timeout,
});

const teamsChannel = z.strictObject({
  type: z.literal("teams").describe("A Microsoft Teams incoming webhook (Workflows): a message with an Adaptive Card"),
  url: webhookUrl,
  templates,
  timeout,
});

const webhookChannel = z.strictObject({
  type: z.literal("webhook").describe("A generic webhook: the JSON payload of callbacks, with the rendered `subject` and `message`"),
  url: webhookUrl,
  bearer_token: secretRefSchema.optional().describe("Sent as `Authorization: Bearer`; where it is kept (env:NAME, file:/path)"),
  templates,
  timeout,
});

const address = z
  .string()
  .min(3)
  .max(254)
  .regex(/^[^\s<>()[\]\\,;:"]+@[a-z0-9.-]+$/i, { message: "must be a plain e-mail address (name@domain)" });

const emailChannel = z.strictObject({
  type: z.literal("email").describe("E-mail over SMTP"),
  smtp: z
    .strictObject({
      host: z
        .string()
        .min(1)
        .max(253)
        .regex(/^[A-Za-z0-9.:-]+$/, { message: "must be a host name or an IP address" })
        .describe("The SMTP server; its addresses must pass the artifacts address rules"),
      port: z.number().int().min(1).max(65535).optional().describe("Its port (default 465 with security tls, 587 otherwise)"),
      security: z
        .enum(["starttls", "tls", "none"])
        .default("starttls")
        .describe(
          "starttls: plain connection upgraded with STARTTLS, refused if the server does not offer it; tls: TLS from the start (port 465); none: no encryption (loopback tests only)",
        ),
      ca_file: z.string().min(1).optional().describe("A PEM file of the CA that signed the server's certificate (default: the system's)"),
      username: z.string().min(1).max(256).optional().describe("The login, when the server wants one"),
      password: secretRefSchema
        .optional()
        .meta({ description: "Where the password is kept (env:NAME, file:/path)", examples: ["env:SMTP_PASSWORD"] }),
    })
    .refine((s) => (s.username === undefined) === (s.password === undefined), {
      message: "username and password go together",
    })
    .describe("How the mail is sent"),
  from: address.describe("The sender's address"),
  to: z.array(address).min(1).max(100).describe("The recipients"),
  templates,
  timeout,
});

const channel = z.discriminatedUnion("type", [slackChannel, teamsChannel, webhookChannel, emailChannel]);
export type NotificationChannel = z.output<typeof channel>;

const subscription = z.strictObject({
  tenant: pattern("tenant").describe('The tenants whose deploys and releases are notified: a name, a pattern, or "*"'),
  applications: pattern("application").default("*").describe("Only these applications (a name or pattern)"),
  environments: pattern("environment").default("*").describe("Only these environments (a release: any of its environments)"),
  of: z
    .array(z.enum(["deploy", "release"]))
    .min(1)
    .default(["deploy", "release"])
    .describe("Deploys (rollbacks included, dry runs never), releases, or both"),
  events: z.array(z.enum(notificationEvents)).min(1).describe("The events notified"),
  channels: z.array(z.string().min(1)).min(1).describe("The channels (names under notifications.channels) that get them"),
});
export type NotificationSubscription = z.output<typeof subscription>;

export const notificationsConfigSchema = z
  .strictObject({
    channels: z
      .record(z.string().regex(/^[a-z0-9][a-z0-9-]*$/, { message: "channel names are lower-case letters, digits and '-'" }), channel)
      .default({})
      .meta({
        description: "Where notifications go, by name",
        examples: [{ ops: { type: "slack", url: "env:SLACK_WEBHOOK_URL" } }],
      }),
    subscriptions: z.array(subscription).default([]).describe("Which tenants' events go to which channels"),
    delivery: z
      .strictObject({
        max_attempts: z.number().int().min(1).max(100).default(10).describe("Attempts of one delivery before it is recorded as failed"),
        retry_interval: durationMs.default(5_000).describe("First wait between attempts; it doubles at each attempt"),
        max_interval: durationMs.default(600_000).describe("Longest wait between attempts"),
      })
      .default({ max_attempts: 10, retry_interval: 5_000, max_interval: 600_000 })
      .describe("Retries of a delivery that failed (a refused address or a 4xx answer is not retried)"),
  })
  .superRefine((n, ctx) => {
    n.subscriptions.forEach((s, i) =>
      s.channels.forEach((c, j) => {
        if (!(c in n.channels))
          ctx.addIssue({
            code: "custom",
            path: ["subscriptions", i, "channels", j],
            message: `no channel "${c}" under notifications.channels`,
          });
      }),
    );
  })
  .default({ channels: {}, subscriptions: [], delivery: { max_attempts: 10, retry_interval: 5_000, max_interval: 600_000 } })
  .describe("Notifications of deploys and releases to Slack, Microsoft Teams, e-mail and webhooks (docs/operations/notifications.md)");

export type NotificationsConfig = z.output<typeof notificationsConfigSchema>;
