import { createRoute, z } from "@hono/zod-openapi";
import { getCookie } from "hono/cookie";
import type { Context } from "hono";
import { Code, ManentError } from "../../core/errors.js";
import { errorResponses } from "../api-schemas.js";
import { record } from "../audit.js";
import type { ApiApp, ApiDeps, ApiEnv } from "../api-deps.js";
import { refuseUnusableClaims, userPrincipal } from "../oidc/credential-checks.js";
import { checksOf, loginTtlMs, newLogin, safeReturnPath } from "../oidc/login-state.js";
import {
  clearLoginCookie,
  clearSessionCookies,
  loginCookie,
  sessionCookie,
  setLoginCookie,
  setSessionCookies,
} from "../oidc/session-cookies.js";

const param = z.string().max(4096).optional();

const providerInfo = createRoute({
  method: "get",
  path: "/auth/oidc",
  summary: "The OpenID Connect provider people sign in with, for `manent login` (no credential needed)",
  tags: ["sign-in"],
  responses: {
    200: {
      description: "the provider",
      content: {
        "application/json": {
          schema: z
            .object({
              issuer: z.string(),
              client_id: z.string().describe("the CLI's public client id"),
              scopes: z.array(z.string()),
              name: z.string().describe("the provider's name, for the sign-in button"),
            })
            .openapi("OidcProvider"),
        },
      },
    },
    ...errorResponses(Code.NotFound),
  },
});

const login = createRoute({
  method: "get",
  path: "/auth/login",
  summary: "Starts a web UI sign-in: redirects to the provider (authorization code flow with PKCE, state and nonce)",
  tags: ["sign-in"],
  request: {
    query: z.object({
      return_to: z.string().max(512).optional().describe("the page of the web UI to come back to (a path of this server)"),
    }),
  },
  responses: {
    302: { description: "to the provider's sign-in page" },
    ...errorResponses(Code.InvalidArgument, Code.NotFound, Code.Unavailable),
  },
});

const callback = createRoute({
  method: "get",
  path: "/auth/callback",
  summary: "Where the provider sends the browser back: checks the sign-in, starts a session (cookie) and returns to the UI",
  tags: ["sign-in"],
  request: { query: z.object({ code: param, state: param, iss: param, error: param, error_description: param }) },
  responses: {
    302: { description: "signed in: to the web UI, with the session cookie" },
    ...errorResponses(Code.Unauthenticated, Code.NotFound, Code.Unavailable),
  },
});

const logout = createRoute({
  method: "post",
  path: "/auth/logout",
  summary: "Ends the web UI session (needs the session's x-manent-csrf header)",
  tags: ["sign-in"],
  responses: {
    200: {
      description: "signed out",
      content: {
        "application/json": {
          schema: z
            .object({
              signed_out: z.boolean().describe("false when there was no live session"),
              end_session_url: z.string().optional().describe("the provider's logout page, to end the provider's own session too"),
            })
            .openapi("SignedOut"),
        },
      },
    },
    ...errorResponses(Code.PermissionDenied, Code.Unavailable),
  },
});

const notConfigured = () =>
  new ManentError(Code.NotFound, "this server has no OpenID Connect sign-in (auth.oidc in manent.yml); use an API token");

/** The redirect URI registered at the provider: manent.yml's, else this server's own /auth/callback. */
function redirectUri(c: Context<ApiEnv>, configured: string | undefined): string {
  return configured ?? new URL("/auth/callback", c.req.url).href;
}

export function oidcRoutes(app: ApiApp, deps: ApiDeps): void {
  app.openapi(providerInfo, (c) => {
    const { oidc } = deps; // read per request: building the OpenAPI document has no dependencies
    if (!oidc) throw notConfigured();
    const { config } = oidc.relyingParty;
    return c.json({ issuer: config.issuer, client_id: oidc.relyingParty.cliClientId, scopes: config.scopes, name: config.name }, 200);
  });

  app.openapi(login, async (c) => {
    const { oidc } = deps;
    if (!oidc) throw notConfigured();
    const returnTo = c.req.valid("query").return_to ?? "/";
    if (!safeReturnPath(returnTo))
      throw new ManentError(Code.InvalidArgument, "query: return_to: must be a path of this server, e.g. /deploys");
    const { cookie, checks } = newLogin(returnTo);
    const url = await oidc.relyingParty.authorizationUrl(redirectUri(c, oidc.relyingParty.config.redirect_url), checks);
    setLoginCookie(c, cookie, loginTtlMs);
    return c.redirect(url.href, 302);
  });

  app.openapi(callback, async (c) => {
    const { oidc } = deps;
    if (!oidc) throw notConfigured();
    const checks = checksOf(getCookie(c, loginCookie));
    clearLoginCookie(c);
    try {
      if (!checks)
        throw new ManentError(Code.Unauthenticated, "sign-in refused: no sign-in in progress in this browser, or it took over 10 minutes");
      const { error, error_description: description } = c.req.valid("query");
      if (error !== undefined)
        throw new ManentError(Code.Unauthenticated, `sign-in refused by the provider: ${error}${description ? `: ${description}` : ""}`);
      const callbackUrl = new URL(redirectUri(c, oidc.relyingParty.config.redirect_url));
      callbackUrl.search = new URL(c.req.url).search;
      const identity = await oidc.relyingParty.finishSignIn(callbackUrl, checks);
      refuseUnusableClaims(identity, oidc.config);
      const session = await oidc.sessions.create(identity, oidc.relyingParty.config.session_ttl);
      c.set("caller", userPrincipal(identity, oidc.config));
      await record(c, "sign_in", { tenant: null }, "ok", `signed in to the web UI (groups: ${identity.groups.join(", ") || "none"})`);
      setSessionCookies(c, session.id, session.expiresAt);
      return c.redirect(checks.returnTo, 302);
    } catch (err) {
      const e = ManentError.from(err);
      if (e.code === Code.Unauthenticated) await record(c, "sign_in", { tenant: null }, "unauthenticated", e.message);
      throw err;
    }
  });

  app.openapi(logout, async (c) => {
    const { oidc } = deps;
    const id = getCookie(c, sessionCookie);
    const session = oidc && id !== undefined ? await oidc.sessions.find(id) : undefined;
    const ended = oidc !== undefined && id !== undefined && (await oidc.sessions.end(id));
    clearSessionCookies(c);
    let endSession: string | undefined;
    if (oidc)
      endSession = await oidc.relyingParty.provider().then(
        (p) => p.endSessionEndpoint,
        () => undefined,
      );
    if (ended && session && oidc)
      await record(c, "sign_out", { tenant: null }, "ok", "signed out of the web UI", userPrincipal(session, oidc.config));
    return c.json({ signed_out: ended, ...(endSession !== undefined && { end_session_url: endSession }) }, 200);
  });
}
