import type { Callback, CallbackEvent } from "../config/index.js";
import { Code, ManentError, type ErrorJSON } from "../errors.js";

/** The JSON body of a webhook call. */
export interface CallbackPayload {
  event: CallbackEvent;
  deploy: {
    id: string;
    kind: string;
    tenant: string;
    application: string;
    artifact: string;
    environment: string;
    version: string;
    plugin: string;
    status: string;
    error: ErrorJSON | null;
  };
  sent_at: string;
}

/**
 * POSTs one event to one webhook. A 2xx is success; a 4xx other than 408/429 is permanent (the
 * receiver refuses this payload); anything else may pass on a retry.
 */
export async function sendCallback(callback: Callback, payload: CallbackPayload, signal: AbortSignal): Promise<{ status: number }> {
  let response: Response;
  try {
    response = await fetch(callback.url, {
      method: "POST",
      headers: { "content-type": "application/json", "user-agent": "manent", "x-manent-event": payload.event },
      body: JSON.stringify(payload),
      signal: AbortSignal.any([signal, AbortSignal.timeout(callback.timeout)]),
    });
  } catch (err) {
    throw new ManentError(Code.Unavailable, `callback ${callback.url}: ${(err as Error).message}`, { cause: err });
  }
  await response.arrayBuffer().catch(() => undefined);
  if (response.ok) return { status: response.status };
  const retryable = response.status >= 500 || response.status === 408 || response.status === 429;
  throw new ManentError(retryable ? Code.Unavailable : Code.FailedPrecondition, `callback ${callback.url}: HTTP ${response.status}`);
}
