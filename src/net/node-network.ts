import { lookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { clip } from "../core/artifacts/artifact-source.js";
import type { CheckedHost, Network, OutboundRequest } from "../core/artifacts/network.js";
import { Code, ManentError } from "../core/errors.js";

/** The core's network (core/artifacts/network.ts) on Node's DNS resolver and HTTP clients. */
export function nodeNetwork(): Network {
  return { lookup: (hostname) => lookup(hostname, { all: true, verbatim: true }), request: pinnedRequest };
}

function pinnedRequest(url: URL, to: CheckedHost, o: OutboundRequest): Promise<IncomingMessage> {
  // The socket connects to the address already checked, whatever the name resolves to now.
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [to]);
    else callback(null, to.address, to.family);
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
