import ipaddr from "ipaddr.js";

/**
 * The one definition of "loopback" (reachable from this machine only): `localhost`, 127.0.0.0/8,
 * ::1 and IPv4-mapped ::ffff:127.x. Brackets around an IPv6 host (as in a URL or `listen`) are ignored.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  if (h.toLowerCase() === "localhost") return true;
  return ipaddr.isValid(h) && ipaddr.process(h).range() === "loopback";
}

/** True for a plain-http URL on a loopback host (a provider or server on this machine, as in tests). */
export function isLoopbackHttpUrl(url: string | URL): boolean {
  let u: URL;
  try {
    u = typeof url === "string" ? new URL(url) : url;
  } catch {
    return false;
  }
  return u.protocol === "http:" && isLoopbackHost(u.hostname);
}
