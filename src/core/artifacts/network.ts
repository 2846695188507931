import type { IncomingMessage } from "node:http";

/** Resolves a host name to its addresses. */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** A host checked against the address rules: connect to this address, and to nothing else. */
export interface CheckedHost {
  address: string;
  family: 4 | 6;
}

export interface OutboundRequest {
  method: string;
  signal: AbortSignal;
  headers?: Record<string, string>;
  body?: string;
  /** What the request is for, in a failure's message ("artifact", "callback", "analysis"). */
  label?: string;
}

/**
 * The network as the core uses it: name lookups, and HTTP requests to an address the address rules
 * checked. The core holds no socket code (the implementation is src/net/node-network.ts), and a
 * test decides what a name resolves to by giving another `lookup`.
 */
export interface Network {
  lookup: Resolver;
  /**
   * One request to the address `to`, whatever the URL's name resolves to now; redirects are not
   * followed (the caller checks the next hop). A network failure is an `unavailable` ManentError
   * naming `label` and the URL, unless `signal` aborted it.
   */
  request(url: URL, to: CheckedHost, o: OutboundRequest): Promise<IncomingMessage>;
}

/**
 * A tenant's URLs (analysis checks, webhook steps, the load-test hook) as the core reaches them:
 * the server's address rules first, then the request, to the address they checked.
 */
export interface Outbound {
  /** The address to connect to; an `invalid_argument` ManentError naming `field` when the rules refuse the host. */
  check(url: URL, field: string): Promise<CheckedHost>;
  request: Network["request"];
}
