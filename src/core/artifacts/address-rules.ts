import ipaddr from "ipaddr.js";

/**
 * Which addresses an artifact URL may reach. Only public unicast addresses by default: loopback,
 * private, link-local (a cloud's metadata service), carrier-grade NAT, unique-local, multicast,
 * reserved and the IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4, Teredo) are refused
 * unless a range of `allowed_networks` holds them. An IPv4-mapped IPv6 address is judged as the
 * IPv4 address it carries, so `::ffff:127.0.0.1` is loopback.
 */
export class AddressRules {
  private readonly allowed: [ipaddr.IPv4 | ipaddr.IPv6, number][];

  constructor(allowedNetworks: readonly string[]) {
    this.allowed = allowedNetworks.map((n) =>
      n.includes("/") ? ipaddr.parseCIDR(n) : [ipaddr.parse(n), ipaddr.parse(n).kind() === "ipv4" ? 32 : 128],
    );
  }

  /** Undefined when the address may be reached; otherwise why not (e.g. "loopback"). */
  refusal(address: string): string | undefined {
    if (!ipaddr.isValid(address)) return "not an IP address";
    const parsed = normalize(ipaddr.parse(address));
    for (const [net, bits] of this.allowed) {
      const n = normalize(net);
      if (n.kind() === parsed.kind() && parsed.match(n, bits)) return undefined;
    }
    const range = parsed.range();
    return range === "unicast" ? undefined : (rangeNames[range] ?? range);
  }
}

function normalize(a: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return a instanceof ipaddr.IPv6 && a.isIPv4MappedAddress() ? a.toIPv4Address() : a;
}

const rangeNames: Record<string, string> = {
  loopback: "a loopback address",
  private: "a private address",
  linkLocal: "a link-local address",
  uniqueLocal: "a unique-local (private) address",
  carrierGradeNat: "a carrier-grade NAT address",
  unspecified: "the unspecified address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
  reserved: "a reserved address",
  ipv4Mapped: "an IPv4-compatible IPv6 address",
  rfc6052: "a NAT64 address",
  rfc6145: "an IPv4-translated address",
  "6to4": "a 6to4 address",
  teredo: "a Teredo address",
  benchmarking: "a benchmarking address",
  amt: "an AMT address",
  as112: "an AS112 address",
  deprecated: "a deprecated address",
  orchid2: "an ORCHIDv2 address",
  droneRemoteIdProtocolEntityTags: "a reserved address",
};
