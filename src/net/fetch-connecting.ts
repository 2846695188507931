import type { ConnectionOptions } from "node:tls";

/**
 * A fetch whose TLS connections use `options` (a private CA, a client certificate): undici, Node's
 * own fetch, with a dispatcher of its own. Shared by the CLI (its server and its OpenID provider)
 * and manent-server (its OpenID provider), so both trust certificates the same way.
 */
export async function fetchConnecting(options: ConnectionOptions): Promise<typeof fetch> {
  const { Agent, fetch: undiciFetch } = await import("undici");
  const dispatcher = new Agent({ connect: options });
  return ((input: unknown, init?: object) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...init, dispatcher })) as unknown as typeof fetch;
}
