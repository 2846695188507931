import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** What the plugin accepts as a host's identity: known_hosts lines and/or pinned fingerprints. */
export interface HostKeyPolicy {
  knownHosts?: string;
  fingerprints?: string[];
}

export type HostKeyVerdict = { ok: true } | { ok: false; reason: string };

/** OpenSSH's fingerprint of a public key blob: `SHA256:` + unpadded base64 of its sha256. */
export function fingerprintOf(keyBlob: Buffer): string {
  return `SHA256:${createHash("sha256").update(keyBlob).digest("base64").replace(/=+$/, "")}`;
}

/** The key type written inside an SSH public key blob (its first string). */
export function keyTypeOf(keyBlob: Buffer): string {
  if (keyBlob.length < 4) return "unknown";
  const len = keyBlob.readUInt32BE(0);
  return keyBlob.subarray(4, 4 + len).toString("latin1");
}

/**
 * Decides whether `keyBlob` is the right key for host:port. known_hosts follows OpenSSH: the
 * host is written `host` for port 22 and `[host]:port` otherwise; patterns may be lists, use
 * `*`/`?`, be negated with `!`, or be hashed (`|1|salt|hash`); `@revoked` keys are refused;
 * `@cert-authority` lines are ignored (certificates are not supported).
 */
export function verifyHostKey(policy: HostKeyPolicy, host: string, port: number, keyBlob: Buffer): HostKeyVerdict {
  const seen = fingerprintOf(keyBlob);
  const type = keyTypeOf(keyBlob);
  if (policy.fingerprints?.includes(seen)) return { ok: true };
  const name = port === 22 ? host : `[${host}]:${port}`;
  let hostKnown = false;
  for (const entry of parseKnownHosts(policy.knownHosts ?? "")) {
    if (entry.marker === "@cert-authority" || !matchesHost(entry.patterns, name)) continue;
    const same = entry.key.length === keyBlob.length && timingSafeEqual(entry.key, keyBlob);
    if (entry.marker === "@revoked") {
      if (same)
        return {
          ok: false,
          reason: `host key of ${name} is revoked in known_hosts (seen ${type} ${seen})`,
        };
      continue;
    }
    if (same) return { ok: true };
    hostKnown = true;
  }
  if (hostKnown) {
    return {
      ok: false,
      reason: `host key of ${name} has CHANGED: known_hosts has other keys, seen ${type} ${seen}`,
    };
  }
  const where = policy.knownHosts !== undefined ? "not in known_hosts" : "does not match host_key_fingerprint";
  return {
    ok: false,
    reason: `host key of ${name} is unknown (${where}): seen ${type} ${seen}`,
  };
}

interface KnownHostsEntry {
  marker?: string;
  patterns: string[];
  key: Buffer;
}

function parseKnownHosts(text: string): KnownHostsEntry[] {
  const entries: KnownHostsEntry[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const fields = line.split(/\s+/);
    const marker = fields[0]!.startsWith("@") ? fields.shift() : undefined;
    const [hosts, , key] = fields;
    if (!hosts || !key) continue;
    entries.push({
      ...(marker ? { marker } : {}),
      patterns: hosts.split(","),
      key: Buffer.from(key, "base64"),
    });
  }
  return entries;
}

/** A line matches when one positive pattern matches and no negated one does. */
function matchesHost(patterns: string[], name: string): boolean {
  let matched = false;
  for (const p of patterns) {
    if (p.startsWith("!")) {
      if (matchPattern(p.slice(1), name)) return false;
    } else if (matchPattern(p, name)) {
      matched = true;
    }
  }
  return matched;
}

function matchPattern(pattern: string, name: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [, , salt, hash] = pattern.split("|");
    if (!salt || !hash) return false;
    const mac = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64");
    return mac === hash;
  }
  const re = new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replaceAll("*", ".*")
      .replaceAll("?", ".")}$`,
    "i",
  );
  return re.test(name);
}
