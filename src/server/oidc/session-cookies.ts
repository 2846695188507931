import { isLoopbackHttpUrl } from "../../core/net/loopback.js";
import { createHmac } from "node:crypto";
import type { Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";

/** The web UI's session: HttpOnly, so no script reads it. */
export const sessionCookie = "manent_session";
/** The CSRF token bound to the session, readable by the UI's script (which sends it back as `x-manent-csrf`). */
export const csrfCookie = "manent_csrf";
export const csrfHeader = "x-manent-csrf";
/** A sign-in in progress (login-state.ts). */
export const loginCookie = "manent_login";

/** The session's CSRF token: derived from its id, so nothing more is stored and a stolen database yields none. */
export function csrfTokenFor(sessionId: string): string {
  return createHmac("sha256", sessionId).update("manent csrf").digest("base64url");
}

/**
 * Cookies are `Secure` except on plain http to a loopback address (a server on the reader's own
 * machine, the tests): there is no TLS to require there, and a browser would not send a Secure
 * cookie back over http to 127.0.0.1. Anywhere else the server runs behind TLS (its own or a
 * proxy's), and the cookies never travel in clear.
 */
export function secureCookies(c: Context): boolean {
  return !isLoopbackHttpUrl(c.req.url);
}

export function setSessionCookies(c: Context, sessionId: string, expiresAt: Date): void {
  const secure = secureCookies(c);
  const common = { path: "/", secure, sameSite: "Lax" as const, expires: expiresAt };
  setCookie(c, sessionCookie, sessionId, { ...common, httpOnly: true });
  setCookie(c, csrfCookie, csrfTokenFor(sessionId), { ...common, httpOnly: false });
}

export function clearSessionCookies(c: Context): void {
  const secure = secureCookies(c);
  deleteCookie(c, sessionCookie, { path: "/", secure, httpOnly: true, sameSite: "Lax" });
  deleteCookie(c, csrfCookie, { path: "/", secure, sameSite: "Lax" });
}

export function setLoginCookie(c: Context, value: string, maxAgeMs: number): void {
  setCookie(c, loginCookie, value, {
    path: "/auth/",
    secure: secureCookies(c),
    httpOnly: true,
    // Lax: sent back on the provider's top-level redirect to /auth/callback, never on a cross-site POST.
    sameSite: "Lax",
    maxAge: Math.floor(maxAgeMs / 1000),
  });
}

export function clearLoginCookie(c: Context): void {
  deleteCookie(c, loginCookie, { path: "/auth/", secure: secureCookies(c), httpOnly: true, sameSite: "Lax" });
}
