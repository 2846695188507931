import { readSecretRef } from "../config/secret-ref.js";
import { Code, ManentError } from "../errors.js";
import { httpRequest, type Reach } from "../rollout/analysis/http-request.js";
import type { WebhookRequest } from "../rollout/webhook-call.js";

/**
 * The rollout's webhook calls (webhook steps, the load-test hook) over HTTP: a JSON POST to the
 * address `reach` checked (the server's address rules, as analysis checks and callbacks have them),
 * redirects not followed, the answer's body read (capped) and dropped. Throws what httpRequest
 * throws: NoAnswerError, AddressRefusedError, or a `canceled` ManentError.
 */
export async function postWebhook(req: WebhookRequest, reach: Reach): Promise<{ status: number }> {
  const token = req.bearerToken && (await bearerToken(req.bearerToken.field, req.bearerToken.ref));
  const answer = await httpRequest({
    url: req.url,
    field: req.field,
    reach,
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

/** Read at each call (a rotated file is used at once); refused for good, naming the field, never the value. */
async function bearerToken(field: string, ref: Parameters<typeof readSecretRef>[1]): Promise<string> {
  const token = await readSecretRef(field, ref).catch((err: unknown) => {
    throw new ManentError(Code.InvalidArgument, ManentError.from(err).message);
  });
  // A header value with spaces or control characters would be refused by fetch with the value in its message.
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new ManentError(Code.InvalidArgument, `${field}: the token must be printable ASCII without spaces`);
  return token;
}
