import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { notificationsConfigSchema, type NotificationChannel } from "../../src/core/config/notifications-config.js";
import { slackPayload, teamsPayload } from "../../src/core/notifications/channel-payloads.js";
import type { NotificationFacts } from "../../src/core/notifications/notification-source.js";
import { renderMessage } from "../../src/core/notifications/notification-templates.js";

/** Values as hostile as a deploy's error message can be: markup, a link, JSON and header breaks. */
const facts: NotificationFacts = {
  event: "failed",
  of: "deploy",
  id: "d-1",
  kind: "deploy",
  tenant: "acme",
  application: "web",
  artifact: "web",
  environment: "prod",
  version: "1.0.0",
  status: "failed",
  error: '<https://evil.example|click> & "}],"x":{"\r\nBcc: victim@example.com',
  hint: null,
  drifted: [],
  at: "2026-01-01T00:00:00.000Z",
};

const channel = (type: NotificationChannel["type"], templates: Record<string, unknown> = {}): NotificationChannel => {
  const base = type === "email" ? { smtp: { host: "mail.example.com" }, from: "a@example.com", to: ["b@example.com"] } : { url: "env:URL" };
  return notificationsConfigSchema.parse({ channels: { c: { type, ...base, templates } } }).channels.c!;
};

describe("notification templates", () => {
  it("escapes Slack's mrkdwn in values: no link, no mention can be injected", () => {
    const m = renderMessage(channel("slack"), facts);
    assert.match(m.text, /&lt;https:\/\/evil\.example\|click&gt; &amp; /);
    assert.equal(m.text.includes("<https"), false);
    // The whole value stays one JSON string of the body.
    const body = JSON.parse(JSON.stringify(slackPayload(m))) as { blocks: { text: { text: string } }[] };
    assert.equal(body.blocks[1]!.text.text, m.text);
  });

  it("escapes Teams' Markdown in values", () => {
    const m = renderMessage(channel("teams"), facts);
    assert.match(m.text, /\\<https:\/\/evil\.example\\\|click\\>/);
    const card = teamsPayload(m) as { attachments: { content: { body: { text: string }[] } }[] };
    assert.equal(card.attachments[0]!.content.body[1]!.text, m.text);
  });

  it("keeps an e-mail's subject one line whatever a value holds", () => {
    const m = renderMessage(channel("email", { failed: { subject: "{{application}} failed: {{error}}" } }), facts);
    assert.equal(/[\r\n]/.test(m.subject), false);
    assert.match(m.subject, /^web failed: <https:\/\/evil\.example\|click> & "}\],"x":{" Bcc: victim@example\.com$/);
  });

  it("refuses a template that does not parse, or a partial, naming the field", () => {
    const bad = (t: string) =>
      notificationsConfigSchema.safeParse({ channels: { c: { type: "slack", url: "env:U", templates: { failed: { text: t } } } } });
    const unclosed = bad("{{#error}} never closed");
    assert.equal(unclosed.success, false);
    assert.deepEqual(unclosed.error!.issues[0]!.path, ["channels", "c", "templates", "failed", "text"]);
    assert.match(unclosed.error!.issues[0]!.message, /not a valid template: Unclosed section "error"/);
    assert.match(bad("{{> other}}").error!.issues[0]!.message, /partials/);
  });

  it("refuses a subscription naming a channel that does not exist", () => {
    const r = notificationsConfigSchema.safeParse({ subscriptions: [{ tenant: "*", events: ["failed"], channels: ["nowhere"] }] });
    assert.equal(r.success, false);
    assert.deepEqual(r.error!.issues[0]!.path, ["subscriptions", 0, "channels", 0]);
    assert.match(r.error!.issues[0]!.message, /no channel "nowhere"/);
  });
});
