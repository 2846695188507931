import { createHmac, randomBytes } from "node:crypto";

/** How long a sign-in may take at the provider before its callback is refused. */
export const loginTtlMs = 10 * 60_000;

/** What a sign-in's callback is checked with: all derived from the secret kept in the browser's login cookie. */
export interface LoginChecks {
  state: string;
  nonce: string;
  codeVerifier: string;
  /** The page of the web UI to go back to. */
  returnTo: string;
}

/**
 * A sign-in in progress, kept in the browser (an HttpOnly cookie) rather than on the server, so a
 * fleet of servers needs no shared state for it and nothing of it is in the database: the cookie
 * holds a random secret, its start time and where to return; the state, nonce and PKCE verifier
 * are derived from them with HMAC. The provider only ever sees the state and the verifier's hash.
 */
export function newLogin(returnTo: string, now = Date.now()): { cookie: string; checks: LoginChecks } {
  const cookie = Buffer.from(JSON.stringify({ s: randomBytes(32).toString("base64url"), t: now, r: returnTo })).toString("base64url");
  return { cookie, checks: checksOf(cookie, now)! };
}

/** The checks of a login cookie; undefined when it is malformed or older than `loginTtlMs`. */
export function checksOf(cookie: string | undefined, now = Date.now()): LoginChecks | undefined {
  if (!cookie || cookie.length > 1024) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cookie, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
  const { s, t, r } = (parsed ?? {}) as { s?: unknown; t?: unknown; r?: unknown };
  if (typeof s !== "string" || s.length < 40 || typeof t !== "number" || typeof r !== "string" || !safeReturnPath(r)) return undefined;
  if (now - t > loginTtlMs || t - now > 60_000) return undefined;
  const derive = (what: string) => createHmac("sha256", s).update(`${what}\0${t}\0${r}`).digest("base64url");
  return { state: derive("state"), nonce: derive("nonce"), codeVerifier: derive("pkce") + derive("pkce2"), returnTo: r };
}

/** A path of this server (never another site: `//evil.example` or `/\evil` are refused). */
export function safeReturnPath(path: string): boolean {
  return /^\/(?![/\\])[\x21-\x7e]*$/.test(path) && path.length <= 512;
}
