import { Code, ManentError } from "../errors.js";
import { RolloutStopped } from "./gate-runner.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";
import { callWebhook, webhookPayload } from "./webhook-call.js";

/**
 * The load-test hook (`rollout.load_test`, Flagger's load tester): before an analysis measures,
 * its URL is POSTed the deploy's metadata so a load generator sends traffic for the checks to
 * judge. One checkpointed step named `step` (retried twice on no answer or a 5xx): a resumed
 * rollout does not call it again once it answered. Anything but a 2xx (or a refused address)
 * stops the rollout naming the URL, without its query, and the answer.
 */
export async function runLoadTest(
  host: RolloutHost,
  rec: RolloutRecorder,
  step: string,
  label: string,
  previousVersion: string | undefined,
): Promise<void> {
  const hook = host.r.rollout?.load_test;
  if (!hook) return;
  try {
    await host.step(step, { maxRetries: 2, intervalMs: 1000 }, async (ctx) => {
      const answer = await callWebhook(host, {
        url: hook.url,
        field: "rollout.load_test.url",
        ...(hook.bearer_token && { bearerToken: { ref: hook.bearer_token, field: "rollout.load_test.bearer_token" } }),
        payload: webhookPayload(host, rec, "load_test", step, previousVersion),
        timeoutMs: hook.timeout,
        signal: ctx.signal,
      });
      if (answer.status !== null && answer.status >= 200 && answer.status < 300) return { result: answer.message };
      // A refusal or a 4xx will not change on a retry.
      const permanent = answer.refused || (answer.status !== null && answer.status < 500 && answer.status !== 408 && answer.status !== 429);
      throw new ManentError(permanent ? Code.FailedPrecondition : Code.Unavailable, `load test ${answer.message}`);
    });
  } catch (err) {
    if (!(err instanceof ManentError) || err.code === Code.Canceled) throw err;
    throw new RolloutStopped(Code.Aborted, `${label} failed: ${err.message}`);
  }
}
