import { readBearerToken } from "../config/secret-ref.js";
import type { Outbound } from "../artifacts/network.js";
import { httpRequest } from "../rollout/analysis/http-request.js";
import type { WebhookRequest } from "../rollout/webhook-call.js";

/**
 * The rollout's webhook calls (webhook steps, the load-test hook) over HTTP: a JSON POST to the
 * address `outbound` checked (the server's address rules, as analysis checks and callbacks have them),
 * redirects not followed, the answer's body read (capped) and dropped. Throws what httpRequest
 * throws: NoAnswerError, AddressRefusedError, or a `canceled` ManentError.
 */
export async function postWebhook(req: WebhookRequest, outbound: Outbound): Promise<{ status: number }> {
  const token = req.bearerToken && (await readBearerToken(req.bearerToken.field, req.bearerToken.ref));
  const answer = await httpRequest({
    url: req.url,
    field: req.field,
    outbound,
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-manent-event": req.payload.event,
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(req.payload),
    timeoutMs: req.timeoutMs,
    signal: req.signal,
  });
  return { status: answer.status };
}
