import type { IncomingMessage } from "node:http";
import { Code, ManentError } from "../errors.js";
import type { ArtifactPolicy } from "./artifact-policy.js";
import { clip } from "./artifact-source.js";
import type { Network } from "./network.js";

const maxRedirects = 5;

/**
 * GETs an artifact URL the policy allows. Each hop is checked (allowed URL, every resolved address)
 * before connecting, and the connection goes to the checked address, so a name that resolves
 * elsewhere a moment later (DNS rebinding) changes nothing; every redirect is checked the same way.
 * A 5xx or 429 is `unavailable` (retried); another failure status is permanent.
 */
export async function fetchPinned(
  start: URL,
  policy: ArtifactPolicy,
  network: Pick<Network, "request">,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  let url = start;
  for (let hop = 0; ; hop++) {
    const host = await policy.checkUrl(url);
    const response = await network.request(url, host, { method: "GET", signal });
    const status = response.statusCode ?? 0;
    if ([301, 302, 303, 307, 308].includes(status)) {
      response.resume();
      const location = response.headers.location;
      if (!location || hop >= maxRedirects) {
        throw new ManentError(
          Code.FailedPrecondition,
          `artifact ${clip(start.href)}: ${location ? `more than ${maxRedirects} redirects` : `HTTP ${status} without a Location`}`,
        );
      }
      url = new URL(location, url);
      continue;
    }
    if (status < 200 || status >= 300) {
      response.resume();
      const code = status >= 500 || status === 429 ? Code.Unavailable : Code.FailedPrecondition;
      throw new ManentError(code, `artifact ${clip(url.href)}: HTTP ${status} ${response.statusMessage ?? ""}`.trimEnd());
    }
    return response;
  }
}
