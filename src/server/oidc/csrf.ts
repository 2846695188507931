import { timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { Code, ManentError } from "../../core/errors.js";
import { csrfHeader, csrfTokenFor, sessionCookie } from "./session-cookies.js";

const safeMethods = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Refuses a state-changing request that rides on the session cookie unless it comes from the web
 * UI itself: same origin (the browser's `Origin` and `Sec-Fetch-Site`, when sent, must say so) and
 * carrying the session's CSRF token in the `x-manent-csrf` header, which another site can neither
 * read (the cookie is this origin's) nor set without a CORS preflight this server never grants.
 * A request with an Authorization header is not a cookie request (bearer tokens are not sent by
 * browsers on their own) and is left to the authenticator.
 */
export function csrfProtection(): MiddlewareHandler {
  return async (c, next) => {
    const session = getCookie(c, sessionCookie);
    if (safeMethods.has(c.req.method) || session === undefined || c.req.header("authorization") !== undefined) return next();
    const refuse = (why: string) =>
      new ManentError(
        Code.PermissionDenied,
        `cross-site request refused: ${why} (a signed-in browser's change must come from manent's own pages)`,
      );
    const origin = c.req.header("origin");
    // Hosts are compared, not schemes: behind a TLS proxy the browser's https origin reaches us as http.
    if (origin !== undefined && hostOf(origin) !== new URL(c.req.url).host) throw refuse(`Origin ${origin} is not this server`);
    const site = c.req.header("sec-fetch-site");
    if (site !== undefined && site !== "same-origin") throw refuse(`Sec-Fetch-Site is ${site}`);
    const sent = Buffer.from(c.req.header(csrfHeader) ?? "");
    const expected = Buffer.from(csrfTokenFor(session));
    if (sent.length !== expected.length || !timingSafeEqual(sent, expected)) throw refuse(`missing or wrong ${csrfHeader} header`);
    return next();
  };
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}
