import Mustache from "mustache";
import type { NotificationChannel, NotificationEvent } from "../config/notifications-config.js";
import type { NotificationFacts } from "./notification-source.js";

/** A message rendered for one channel: a one-line subject and a text. */
export interface RenderedMessage {
  subject: string;
  text: string;
}

/** The default of each event; a channel's `templates.<event>` replaces either part. */
export const defaultTemplates: Record<NotificationEvent, { subject: string; text: string }> = {
  started: {
    subject: "{{kind}} of {{application}} {{version}} to {{environment}} started",
    text: "The {{kind}} {{id}} of {{application}} ({{artifact}}) {{version}} to {{environment}} started (tenant {{tenant}}).",
  },
  waiting: {
    subject: "{{kind}} of {{application}} {{version}} to {{environment}} is waiting",
    text: "The {{kind}} {{id}} of {{application}} {{version}} to {{environment}} is waiting (tenant {{tenant}}): {{hint}}",
  },
  succeeded: {
    subject: "{{kind}} of {{application}} {{version}} to {{environment}} succeeded",
    text: "The {{kind}} {{id}} of {{application}} ({{artifact}}) {{version}} to {{environment}} succeeded (tenant {{tenant}}).",
  },
  failed: {
    subject: "{{kind}} of {{application}} {{version}} to {{environment}} failed",
    text: "The {{kind}} {{id}} of {{application}} ({{artifact}}) {{version}} to {{environment}} failed (tenant {{tenant}}): {{error}}",
  },
  rolled_back: {
    subject: "{{kind}} of {{application}} {{version}} to {{environment}} was rolled back",
    text: "The {{kind}} {{id}} of {{application}} {{version}} to {{environment}} failed and was rolled back (tenant {{tenant}}): {{error}}",
  },
  drifted: {
    subject: "drift found: {{application}} in {{environment}}",
    text: "{{application}} ({{artifact}}) in {{environment}} no longer runs what deploy {{id}} ({{version}}) left (tenant {{tenant}}); drifted targets: {{drifted}}",
  },
};

/**
 * How a value is escaped inside a channel's text: Slack's mrkdwn gives `&`, `<` and `>` a meaning
 * (`<url|label>` is a link), Teams' Markdown its punctuation; an e-mail's text and a webhook's
 * JSON string take a value as it is. A value can never leave the text it is in: every channel
 * places the rendered text in its JSON with JSON.stringify, and an e-mail's subject loses its line ends.
 */
const escapes: Record<NotificationChannel["type"], (v: string) => string> = {
  slack: (v) => v.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"),
  // The characters that make emphasis, code, links and headings anywhere in a line (list markers need a line's start, which a value inside a sentence never has).
  teams: (v) => v.replace(/[\\`*_[\]()#|<>~]/g, "\\$&"),
  email: (v) => v,
  webhook: (v) => v,
};

/** Renders the subject and text of `facts` for one channel, with its templates over the defaults. */
export function renderMessage(channel: NotificationChannel, facts: NotificationFacts): RenderedMessage {
  const own = channel.templates[facts.event] ?? {};
  const view = { ...facts, error: facts.error ?? "", hint: facts.hint ?? "", drifted: facts.drifted.join(", ") };
  // A writer of its own: templates are cached per writer, not in the module's global cache.
  const writer = new Mustache.Writer();
  const render = (t: string, escape: (v: string) => string) =>
    writer.render(t, view, undefined, { escape: (v: unknown) => escape(String(v)) });
  const subject = render(own.subject ?? defaultTemplates[facts.event].subject, escapes[channel.type])
    // One line: a header (an e-mail's Subject) cannot be split into two by a value.
    .replace(/[\r\n\u2028\u2029]+/g, " ")
    .replace(/[\u0000-\u001f\u007f]/g, "")
    .slice(0, 250);
  const text = render(own.text ?? defaultTemplates[facts.event].text, escapes[channel.type]).replace(
    /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g,
    "",
  );
  return { subject, text };
}
