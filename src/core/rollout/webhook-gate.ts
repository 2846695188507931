import { DBOS } from "@dbos-inc/dbos-sdk";
import { Code } from "../errors.js";
import { faultPoint } from "../engine/fault-points.js";
import type { CommandInbox, WaitOutcome } from "./command-inbox.js";
import { abortedBy, backgroundStopped, commandText, endGate, RolloutStopped } from "./gate-runner.js";
import { formatMs, shownUrl, type WebhookSettings } from "./rollout-config.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";
import { callWebhook, webhookPayload, type WebhookAnswer } from "./webhook-call.js";

/**
 * A webhook step or gate (Flagger's confirm-promotion): POSTs the deploy's metadata to the URL
 * every `interval` until it answers 2xx (go); any other answer, or none, means wait. No 2xx within
 * `timeout` stops the rollout (deadline_exceeded) naming the URL (without its query) and its last
 * answer; a URL the address rules refuse stops it at once. `manent promote` goes on without the
 * URL's go, `manent abort` stops. Durable: the start is checkpointed (the deadline survives a
 * restart), each call is a checkpointed step, and each wait a durable one.
 */
export async function runWebhookGate(
  host: RolloutHost,
  rec: RolloutRecorder,
  inbox: CommandInbox,
  name: string,
  label: string,
  field: string,
  spec: WebhookSettings,
  previousVersion: string | undefined,
): Promise<void> {
  const since = await DBOS.runStep(
    async () => {
      faultPoint(name, "before");
      await host.store.stepStarted(host.id, 6, name);
      return Date.now();
    },
    { name },
  );
  const until = since + spec.timeout;
  const shown = shownUrl(spec.url);
  const waiting = {
    kind: "webhook" as const,
    step: name,
    since: new Date(since).toISOString(),
    until: new Date(until).toISOString(),
    hint: `waiting until POST ${shown} answers 2xx (manent promote ${host.id} to go on without it)`,
  };
  rec.state.waiting = waiting;
  await rec.save();

  let last: WebhookAnswer | undefined;
  let outcome: WaitOutcome | undefined;
  let go = false;
  for (let round = 1; ; round++) {
    // No poll here: it would drop a plain promote sent during the call; the wait below reads it.
    if (inbox.aborted || inbox.promotedFull) {
      outcome = { ended: "command", message: (inbox.aborted ?? inbox.promotedFull)! };
      break;
    }
    const answer = await DBOS.runStep(
      async () => {
        const payload = webhookPayload(host, rec, "confirm", name, previousVersion);
        const got = await callWebhook(host, {
          url: spec.url,
          field,
          ...(spec.bearer_token && { bearerToken: { ref: spec.bearer_token, field: field.replace(/url$/, "bearer_token") } }),
          payload,
          timeoutMs: spec.call_timeout,
          signal: AbortSignal.timeout(spec.call_timeout + 5000),
        });
        return { ...got, at: Date.now() };
      },
      { name: `${name}:${round}` },
    );
    last = answer;
    go = answer.status !== null && answer.status >= 200 && answer.status < 300;
    rec.state.waiting = { ...waiting, hint: go ? waiting.hint : `${waiting.hint}; last: ${answer.message}` };
    await rec.save();
    faultPoint(`${name}:${round}`, "after");
    if (go || answer.refused) break;
    outcome = await inbox.wait("webhook", Math.min(answer.at + spec.interval, until), name);
    if (outcome.ended !== "timeout" || (await DBOS.now()) >= until) break;
    outcome = undefined;
  }
  rec.state.waiting = null;
  const lastText = last ? `last: ${last.message}` : "not called";
  const stop: RolloutStopped | undefined = go
    ? undefined
    : last?.refused
      ? new RolloutStopped(Code.InvalidArgument, `${label} failed: ${last.message}`)
      : outcome?.ended === "command" && outcome.message.command === "abort"
        ? abortedBy(outcome.message, label)
        : outcome?.ended === "background"
          ? backgroundStopped(outcome.reason, label)
          : outcome?.ended === "timeout"
            ? new RolloutStopped(
                Code.DeadlineExceeded,
                `${label}: POST ${shown} did not answer 2xx within ${formatMs(spec.timeout)} (${lastText})`,
              )
            : undefined;
  const endedBy = go
    ? `go: ${last!.message}`
    : stop
      ? stop.message
      : outcome?.ended === "command"
        ? `${commandText(outcome.message)} (${lastText})`
        : lastText;
  await endGate(host, rec, name, endedBy, stop);
}
