import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import type { Target } from "../core/contract/index.js";

/**
 * The addresses each target host resolves to (all of them, as the SSH client may use any). A name that does not
 * resolve keeps its name: its deploy fails when it connects, which says why.
 */
export async function reachedAddresses(targets: readonly Target[]): Promise<Map<string, string[]>> {
  const hosts = [...new Set(targets.map((t) => t.host))];
  const found = await Promise.all(
    hosts.map(async (host) => {
      const addresses = await lookup(host, { all: true }).then(
        // ::ffff:127.0.0.1 is 127.0.0.1: compared as the address it is.
        (all) => all.map((a) => (ipaddr.isValid(a.address) ? ipaddr.process(a.address).toString() : a.address)),
        () => [host],
      );
      return [host, [...new Set(addresses)]] as [string, string[]];
    }),
  );
  return new Map(found);
}
