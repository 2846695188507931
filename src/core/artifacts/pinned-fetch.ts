import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Code, ManentError } from "../errors.js";
import type { ArtifactPolicy, CheckedHost } from "./artifact-policy.js";
import { clip } from "./artifact-source.js";

const maxRedirects = 5;

/**
 * GETs an artifact URL the policy allows. Each hop is checked (allowed URL, every resolved address)
 * before connecting, and the connection goes to the checked address, so a name that resolves
 * elsewhere a moment later (DNS rebinding) changes nothing; every redirect is checked the same way.
 * A 5xx or 429 is `unavailable` (retried); another failure status is permanent.
 */
export async function fetchPinned(start: URL, policy: ArtifactPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  let url = start;
  for (let hop = 0; ; hop++) {
    const host = await policy.checkUrl(url);
    const response = await get(url, host, signal);
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

function get(url: URL, host: CheckedHost, signal: AbortSignal): Promise<IncomingMessage> {
  return pinnedRequest(url, host, { method: "GET", signal });
}

/**
 * One HTTP request to the address already checked, whatever the URL's host resolves to now.
 * Redirects are not followed: the caller decides (and checks the next hop).
 */
export function pinnedRequest(
  url: URL,
  host: CheckedHost,
  o: { method: string; signal: AbortSignal; headers?: Record<string, string>; body?: string; label?: string },
): Promise<IncomingMessage> {
  // The socket connects to the address already checked, whatever the name resolves to now.
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [host]);
    else callback(null, host.address, host.family);
  };
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: o.method, lookup: pinned, signal: o.signal, headers: { "user-agent": "manent", ...o.headers } },
      resolve,
    );
    req.on("error", (err) =>
      reject(
        o.signal.aborted
          ? err
          : new ManentError(
              Code.Unavailable,
              `${o.label ?? "artifact"} ${clip(url.href)}: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
              {
                cause: err,
              },
            ),
      ),
    );
    req.end(o.body);
  });
}
