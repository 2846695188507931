import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { resolve } from "node:path";
import { ArtifactPolicy } from "../core/artifacts/artifact-policy.js";
import type { CheckedHost, Network } from "../core/artifacts/network.js";
import type { LoadedConfig } from "../core/config/index.js";
import type { NotificationChannel } from "../core/config/notifications-config.js";
import { readSecretRef } from "../core/config/secret-ref.js";
import { Code, ManentError } from "../core/errors.js";
import { slackPayload, teamsPayload, webhookPayload } from "../core/notifications/channel-payloads.js";
import type { NotificationFacts } from "../core/notifications/notification-source.js";
import type { NotificationSender } from "../core/notifications/notifier.js";
import type { RenderedMessage } from "../core/notifications/notification-templates.js";

type Channel<T extends NotificationChannel["type"]> = Extract<NotificationChannel, { type: T }>;

/**
 * The channels' network side: webhooks (Slack, Teams, generic) as one JSON POST, e-mail through
 * nodemailer's SMTP client. Every destination passes the server's address rules first (the
 * artifacts' `allowed_networks`, as callbacks and webhook steps have them) and the connection goes
 * to the address checked, so a name that resolves elsewhere later changes nothing; redirects are
 * not followed. Secrets (the URLs, the password) are read at each attempt and never appear in an
 * error: messages are built from codes and statuses, and scrubbed of the secrets all the same.
 */
export function notificationSender(
  config: Pick<LoadedConfig, "artifacts" | "baseDir" | "workdirPath">,
  network: Network,
): NotificationSender {
  const policy = new ArtifactPolicy({ ...config, lookup: network.lookup });
  return {
    async send(name, channel, message, facts, signal) {
      const field = `notifications.channels.${name}`;
      const secrets: string[] = [];
      try {
        if (channel.type === "email") return await sendMail(field, channel, message, policy, config.baseDir, secrets, signal);
        return await postJson(field, channel, message, facts, policy, network, secrets, signal);
      } catch (err) {
        const e = ManentError.from(err);
        throw new ManentError(e.code, redact(e.message, secrets), { details: { channel: name } });
      }
    },
  };
}

async function postJson(
  field: string,
  channel: Channel<"slack" | "teams" | "webhook">,
  message: RenderedMessage,
  facts: NotificationFacts,
  policy: ArtifactPolicy,
  network: Network,
  secrets: string[],
  signal: AbortSignal,
): Promise<void> {
  const href = await readSecretRef(`${field}.url`, channel.url).catch((err: unknown) => {
    throw new ManentError(Code.FailedPrecondition, ManentError.from(err).message);
  });
  secrets.push(href);
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    url = new URL("invalid:");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new ManentError(Code.FailedPrecondition, `${field}.url: the secret does not hold an http(s) URL`);
  secrets.push(url.pathname + url.search, url.username, url.password);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (channel.type === "webhook") {
    headers["x-manent-event"] = facts.event;
    if (channel.bearer_token) {
      const token = await readSecretRef(`${field}.bearer_token`, channel.bearer_token);
      secrets.push(token);
      if (!/^[\x21-\x7e]+$/.test(token))
        throw new ManentError(Code.FailedPrecondition, `${field}.bearer_token: the token must be printable ASCII without spaces`);
      headers.authorization = `Bearer ${token}`;
    }
  }
  const payload =
    channel.type === "slack"
      ? slackPayload(message)
      : channel.type === "teams"
        ? teamsPayload(message)
        : webhookPayload(message, facts, new Date().toISOString());
  const body = JSON.stringify(payload);
  const to = await checked(policy, url.hostname, field);
  const timeout = AbortSignal.timeout(channel.timeout);
  let status: number;
  try {
    const response = await network.request(url, to, {
      method: "POST",
      headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
      body,
      signal: AbortSignal.any([signal, timeout]),
      label: field,
    });
    response.resume();
    status = response.statusCode ?? 0;
  } catch (err) {
    if (signal.aborted) throw new ManentError(Code.Canceled, `${field}: canceled`);
    if (timeout.aborted) throw new ManentError(Code.DeadlineExceeded, `${field}: no answer within ${channel.timeout} ms`);
    // The reason's code only: a network error's message names the URL.
    const cause = (err as { cause?: NodeJS.ErrnoException }).cause ?? (err as NodeJS.ErrnoException);
    throw new ManentError(Code.Unavailable, `${field}: ${cause.code ?? "the request failed"}`);
  }
  if (status >= 200 && status < 300) return;
  const retry = status >= 500 || status === 408 || status === 429;
  const redirect = status >= 300 && status < 400 ? " (redirects are not followed)" : "";
  throw new ManentError(retry ? Code.Unavailable : Code.FailedPrecondition, `${field}: HTTP ${status}${redirect}`);
}

async function sendMail(
  field: string,
  channel: Channel<"email">,
  message: RenderedMessage,
  policy: ArtifactPolicy,
  baseDir: string,
  secrets: string[],
  signal: AbortSignal,
): Promise<void> {
  const s = channel.smtp;
  const password = s.password && (await readSecretRef(`${field}.smtp.password`, s.password));
  if (password) secrets.push(password);
  const to = await checked(policy, s.host, `${field}.smtp.host`);
  const ca = s.ca_file ? await readFile(resolve(baseDir, s.ca_file), "utf8") : undefined;
  // Imported at the first e-mail, not at start: loading nodemailer cost every server start about
  // 90 ms of CPU (node --cpu-prof), and most servers send no e-mail.
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport({
    // The address checked, and the name for TLS (SNI and the certificate's check).
    host: to.address,
    port: s.port ?? (s.security === "tls" ? 465 : 587),
    secure: s.security === "tls",
    requireTLS: s.security === "starttls",
    ignoreTLS: s.security === "none",
    ...(s.username !== undefined && password !== undefined && { auth: { user: s.username, pass: password } }),
    tls: { ...(isIP(s.host) === 0 && { servername: s.host }), ...(ca !== undefined && { ca }), minVersion: "TLSv1.2" },
    connectionTimeout: channel.timeout,
    greetingTimeout: channel.timeout,
    socketTimeout: channel.timeout,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  // The whole exchange within the channel's timeout (nodemailer's own timeouts are per phase).
  const timeout = AbortSignal.timeout(channel.timeout);
  const bounded = AbortSignal.any([signal, timeout]);
  const stop = () => transport.close();
  bounded.addEventListener("abort", stop, { once: true });
  try {
    await transport.sendMail({
      from: channel.from,
      to: channel.to,
      subject: message.subject,
      text: message.text,
      disableFileAccess: true,
      disableUrlAccess: true,
    });
  } catch (err) {
    if (signal.aborted) throw new ManentError(Code.Canceled, `${field}: canceled`);
    if (timeout.aborted) throw new ManentError(Code.DeadlineExceeded, `${field}: no answer within ${channel.timeout} ms`);
    const e = err as { code?: string; responseCode?: number; message?: string };
    // An SMTP 4xx answer is temporary by definition, a 5xx final; no answer at all may pass later.
    const temporary =
      e.responseCode !== undefined
        ? e.responseCode < 500
        : ["ECONNECTION", "ETIMEDOUT", "ESOCKET", "EDNS", "ECONNRESET"].includes(e.code ?? "");
    const what = e.responseCode !== undefined ? `SMTP ${e.responseCode}` : (e.code ?? "SMTP error");
    throw new ManentError(temporary ? Code.Unavailable : Code.FailedPrecondition, `${field}: ${what}: ${firstLine(e.message ?? "")}`);
  } finally {
    bounded.removeEventListener("abort", stop);
    transport.close();
  }
}

async function checked(policy: ArtifactPolicy, hostname: string, field: string): Promise<CheckedHost> {
  try {
    return await policy.checkHost(hostname, field);
  } catch (err) {
    const e = ManentError.from(err);
    // A refused address is final (`invalid_argument` there): a retry cannot change the rules.
    throw e.code === Code.InvalidArgument ? new ManentError(Code.FailedPrecondition, e.message) : e;
  }
}

function firstLine(s: string): string {
  return s.split("\n")[0]!.slice(0, 300);
}

/** The message with every secret (and any URL) cut out: the last guard, after messages built without them. */
export function redact(message: string, secrets: string[]): string {
  let out = message;
  for (const s of secrets.filter((x) => x.length >= 4).sort((a, b) => b.length - a.length)) out = out.split(s).join("[redacted]");
  return out.replace(/\bhttps?:\/\/\S+/gi, "[redacted URL]");
}
