import type { WorkloadIdentityConfig } from "../../core/config/index.js";
import { matchesPattern, type Grant } from "../../core/identity/index.js";

/** What the policies make of a verified token's claims: the grants of every entry that matches, or why none did. */
export type WorkloadMatch = { matched: WorkloadIdentityConfig[]; grants: Grant[] } | { matched: []; reasons: string[] };

/**
 * Matches a verified token (its issuer and audience already checked against `entries`' issuer)
 * against every entry: an entry matches when the token is for its audience and every claim it
 * names matches one of its patterns. A token matching several entries gets all their grants, as a
 * person in several groups does (the documented rule: entries add up, none overrides another).
 */
export function matchWorkload(entries: readonly WorkloadIdentityConfig[], claims: Record<string, unknown>): WorkloadMatch {
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  const matched: WorkloadIdentityConfig[] = [];
  const reasons: string[] = [];
  for (const entry of entries) {
    const why = mismatch(entry, claims, audiences);
    if (why === undefined) matched.push(entry);
    else reasons.push(`${entry.name}: ${why}`);
  }
  if (matched.length === 0) return { matched: [], reasons };
  return {
    matched,
    grants: matched.map((e) => ({ role: e.role, scope: { tenant: e.tenant, application: e.application, environment: e.environment } })),
  };
}

/** Why `entry` does not match (the first claim that differs), or undefined when it does. */
function mismatch(entry: WorkloadIdentityConfig, claims: Record<string, unknown>, audiences: unknown[]): string | undefined {
  if (!audiences.includes(entry.audience)) return `audience is not ${entry.audience}`;
  for (const [name, pattern] of Object.entries(entry.claims)) {
    const patterns = Array.isArray(pattern) ? pattern : [pattern];
    const value = claimText(claims[name]);
    const want = patterns.length === 1 ? patterns[0]! : `one of ${patterns.join(", ")}`;
    if (value === undefined) return `claim ${name} is ${claims[name] === undefined ? "missing" : "not a string"} (wants ${want})`;
    if (!patterns.some((p) => matchesPattern(p, value))) return `claim ${name} is ${shown(value)}, not ${want}`;
  }
  return undefined;
}

/** A claim's value as text: a string, or a number or boolean as written (GitLab's ids); anything else matches nothing. */
function claimText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return undefined;
}

/** A claim's value quoted for a message: a caller's text, so bounded and with its control characters escaped by JSON. */
export function shown(value: string): string {
  return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value);
}
