import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { Principal } from "../../core/identity/index.js";
import type { PgSessionStore, SessionIdentity } from "../../storage/pg-session-store.js";
import { bearerToken, grantsForUser, type CredentialCheck } from "../identity/index.js";
import type { IdentityClaims } from "./id-token-verifier.js";
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

/**
 * A person whose groups the provider left out of the token (group overage) and whom manent.yml
 * grants nothing by e-mail or subject is refused, saying why and what to change at the provider:
 * signed in with no groups they would only meet 403s that name no cause. One with grants of their
 * own signs in with those.
 */
export function refuseOmittedGroups(identity: IdentityClaims, config: LoadedConfig): void {
  if (!identity.groupsOmitted) return;
  const claim = config.auth.oidc?.groups_claim ?? "groups";
  if (grantsForUser({ subject: identity.subject, email: identity.email, groups: [] }, config.auth).length > 0) return;
  throw new ManentError(
    Code.Unauthenticated,
    `the provider left the "${claim}" claim out of the ID token of ${identity.email ?? identity.subject} (too many groups: it points to another source instead), ` +
      `so manent cannot tell their roles: have the provider send only the groups manent's application needs ` +
      `(e.g. Entra ID: "Groups assigned to the application"; Okta and Keycloak: a groups filter on the claim), or grant this person by e-mail in auth.grants`,
  );
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
      refuseOmittedGroups(claims, config);
      return userPrincipal(claims, config);
    },
  };
}
