import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { Principal } from "../../core/identity/index.js";
import type { PgSessionStore, SessionIdentity } from "../../storage/pg-session-store.js";
import { bearerToken, grantsForUser, type CredentialCheck } from "../identity/index.js";
import type { RelyingParty } from "./relying-party.js";
import { sessionCookie } from "./session-cookies.js";

/** A signed-in person as the policy sees them: `user:<sub>`, their e-mail, groups, and the grants manent.yml gives them now. */
export function userPrincipal(identity: SessionIdentity, config: LoadedConfig): Principal {
  return {
    kind: "user",
    id: `user:${identity.subject}`,
    name: identity.email ?? identity.subject,
    ...(identity.email !== undefined && { email: identity.email }),
    groups: identity.groups,
    grants: grantsForUser({ subject: identity.subject, email: identity.email, groups: identity.groups }, config.auth),
  };
}

/** The web UI's session cookie (a request with an Authorization header is a bearer request and left to the other checks). */
export function sessionCheck(sessions: PgSessionStore, config: LoadedConfig): CredentialCheck {
  return {
    name: "session",
    async check(request) {
      const id = request.cookies[sessionCookie];
      if (request.authorization !== undefined || id === undefined) return undefined;
      const session = await sessions.find(id);
      if (!session) throw new ManentError(Code.Unauthenticated, "session expired or ended: sign in again");
      return userPrincipal(session, config);
    },
  };
}

/** A JWT-shaped bearer token: an ID token of the provider (what `manent login` keeps), verified at each request. */
export function idTokenCheck(relyingParty: RelyingParty, config: LoadedConfig): CredentialCheck {
  return {
    name: "OpenID Connect ID token",
    async check(request) {
      const token = bearerToken(request.authorization);
      if (token === undefined || !/^[\w-]+\.[\w-]*\.[\w-]*$/.test(token)) return undefined;
      const { verifier } = await relyingParty.provider();
      const claims = await verifier.verify(token);
      return userPrincipal(claims, config);
    },
  };
}
