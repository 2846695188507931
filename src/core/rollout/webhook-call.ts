import type { SecretRef } from "../config/secret-ref.js";
import { Code, ManentError } from "../errors.js";
import { AddressRefusedError } from "./analysis/http-request.js";
import { shownUrl } from "./rollout-config.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";

/**
 * The JSON body POSTed to a webhook step's URL (`confirm`) and to the load-test hook (`load_test`):
 * the deploy's metadata and where the rollout is, never a secret (a receiver is often outside).
 */
export interface WebhookPayload {
  event: "confirm" | "load_test";
  deploy: {
    id: string;
    tenant: string;
    application: string;
    environment: string;
    version: string;
    previous_version: string | null;
    plugin: string;
  };
  rollout: { step: string; wave: number | null; weight: number };
  sent_at: string;
}

/** One POST of a payload, through the server's address rules (see RolloutHost.postWebhook). */
export interface WebhookRequest {
  url: string;
  /** The envconfig field that names the URL, for a refusal's message. */
  field: string;
  /** Where the bearer token is read at the call (`…bearer_token`), if the webhook has one. */
  bearerToken?: { ref: SecretRef; field: string };
  payload: WebhookPayload;
  timeoutMs: number;
  signal: AbortSignal;
}

/** What a call got: the status (null without an answer) and a line that says so, the URL without its query. */
export interface WebhookAnswer {
  status: number | null;
  /** The address rules refused the URL: no call can ever succeed. */
  refused: boolean;
  message: string;
}

export function webhookPayload(
  host: RolloutHost,
  rec: RolloutRecorder,
  event: WebhookPayload["event"],
  step: string,
  previousVersion: string | undefined,
): WebhookPayload {
  return {
    event,
    deploy: {
      id: host.id,
      tenant: host.r.tenant,
      application: host.r.application,
      environment: host.r.environment,
      version: host.r.artifact.version,
      previous_version: previousVersion ?? null,
      plugin: host.plugin.name,
    },
    rollout: {
      step,
      wave: rec.state.waves.length > 0 ? rec.state.current_wave : null,
      weight: rec.state.canary?.weight ?? 0,
    },
    sent_at: new Date().toISOString(),
  };
}

/** POSTs once; never throws but for a cancellation: no answer, or a refused address, is an answer too. */
export async function callWebhook(host: RolloutHost, req: WebhookRequest): Promise<WebhookAnswer> {
  const shown = `POST ${shownUrl(req.url)}`;
  try {
    const { status } = await host.postWebhook(req);
    return { status, refused: false, message: `${shown} answered ${status}` };
  } catch (err) {
    if (req.signal.aborted) throw err;
    // Refused for good: an address the rules forbid, or a bearer token that cannot be read or sent.
    const refused = err instanceof AddressRefusedError || (err instanceof ManentError && err.code === Code.InvalidArgument);
    const reason = err instanceof Error ? err.message : String(err);
    return { status: null, refused, message: refused ? `${shown} refused: ${reason}` : `${shown}: no answer (${reason})` };
  }
}
