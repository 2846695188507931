import type { NotificationFacts } from "./notification-source.js";
import type { RenderedMessage } from "./notification-templates.js";

/**
 * The JSON body a Slack incoming webhook takes: `text` (the notification's fallback, shown in
 * alerts) and one section block of mrkdwn (https://api.slack.com/messaging/webhooks).
 */
export function slackPayload(m: RenderedMessage): Record<string, unknown> {
  return {
    text: `${m.subject}\n${m.text}`,
    blocks: [
      { type: "header", text: { type: "plain_text", text: m.subject.slice(0, 150), emoji: false } },
      { type: "section", text: { type: "mrkdwn", text: m.text.slice(0, 3000) } },
    ],
  };
}

/**
 * The body a Microsoft Teams incoming webhook (a Workflows "post to a channel when a webhook
 * request is received" flow) takes: a message with one Adaptive Card
 * (https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using).
 */
export function teamsPayload(m: RenderedMessage): Record<string, unknown> {
  return {
    type: "message",
    attachments: [
      {
        contentType: "application/vnd.microsoft.card.adaptive",
        contentUrl: null,
        content: {
          $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
          type: "AdaptiveCard",
          version: "1.4",
          body: [
            { type: "TextBlock", text: m.subject, weight: "Bolder", size: "Medium", wrap: true },
            { type: "TextBlock", text: m.text, wrap: true },
          ],
        },
      },
    ],
  };
}

/** The generic webhook's body: the callbacks' payload (docs/reference/envconfig.md) with the rendered subject and message. */
export function webhookPayload(m: RenderedMessage, f: NotificationFacts, sentAt: string): Record<string, unknown> {
  return {
    event: f.event,
    [f.of]: {
      id: f.id,
      kind: f.kind,
      tenant: f.tenant,
      application: f.application,
      artifact: f.artifact,
      environment: f.environment,
      version: f.version,
      status: f.status,
      error: f.error,
    },
    ...(f.event === "waiting" && { hint: f.hint }),
    ...(f.event === "drifted" && { drifted: f.drifted }),
    subject: m.subject,
    message: m.text,
    at: f.at,
    sent_at: sentAt,
  };
}
