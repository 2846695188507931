import { ArtifactPolicy } from "../artifacts/artifact-policy.js";
import type { Network } from "../artifacts/network.js";
import type { Callback, CallbackEvent, LoadedConfig } from "../config/index.js";
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
  /** `drifted` only: the targets found drifted (what changed on each). */
  drift?: { targets: unknown[] };
  sent_at: string;
}

/**
 * POSTs one event to one webhook. A 2xx is success; a 4xx other than 408/429 is permanent (the
 * receiver refuses this payload); anything else may pass on a retry. The receiver's addresses pass
 * the artifacts' address rules (public unicast unless `artifacts.allowed_networks` holds them) and
 * the connection goes to the address checked; a redirect is not followed. An envconfig is a
 * tenant's, so its callbacks must not reach the server's network (a cloud's metadata service).
 */
export async function sendCallback(
  callback: Callback,
  payload: CallbackPayload,
  signal: AbortSignal,
  config: Pick<LoadedConfig, "artifacts" | "baseDir" | "workdirPath">,
  network: Network,
): Promise<{ status: number }> {
  const url = new URL(callback.url);
  const host = await new ArtifactPolicy({ ...config, lookup: network.lookup }).checkHost(url.hostname, `callback ${callback.url}`);
  const body = JSON.stringify(payload);
  let status: number;
  try {
    const response = await network.request(url, host, {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), "x-manent-event": payload.event },
      body,
      signal: AbortSignal.any([signal, AbortSignal.timeout(callback.timeout)]),
      label: "callback",
    });
    response.resume();
    status = response.statusCode ?? 0;
  } catch (err) {
    throw err instanceof ManentError
      ? err
      : new ManentError(Code.Unavailable, `callback ${callback.url}: ${(err as Error).message}`, { cause: err });
  }
  if (status >= 200 && status < 300) return { status };
  const retryable = status >= 500 || status === 408 || status === 429;
  const redirect = status >= 300 && status < 400 ? " (redirects are not followed)" : "";
  throw new ManentError(retryable ? Code.Unavailable : Code.FailedPrecondition, `callback ${callback.url}: HTTP ${status}${redirect}`);
}
