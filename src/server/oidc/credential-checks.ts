import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { Principal } from "../../core/identity/index.js";
import type { PgSessionStore, SessionIdentity } from "../../storage/pg-session-store.js";
import { bearerToken, emailGrantsFor, grantsForUser, type CredentialCheck } from "../identity/index.js";
import type { IdentityClaims } from "./id-token-verifier.js";
import type { RelyingParty } from "./relying-party.js";
import { sessionCookie } from "./session-cookies.js";

/**
 * A signed-in person as the policy sees them: `user:<sub>`, their verified e-mail, groups, and the
 * grants manent.yml gives them now. An address the provider does not vouch for is neither their
 * name (the audit would show someone else's address) nor a key to e-mail grants.
 */
export function userPrincipal(identity: SessionIdentity, config: LoadedConfig): Principal {
  const email = identity.emailVerified ? identity.email : undefined;
  return {
    kind: "user",
    id: `user:${identity.subject}`,
    name: email ?? identity.subject,
    ...(email !== undefined && { email }),
    groups: identity.groups,
    grants: grantsForUser(identity, config.auth),
  };
}

/** The refusals of a verified ID token's claims, at sign-in and at each request made with one. */
export function refuseUnusableClaims(identity: IdentityClaims, config: LoadedConfig): void {
  refuseUnverifiedEmailGrant(identity, config);
  refuseOmittedGroups(identity, config);
}

/**
 * A person whose address an e-mail grant names, but whose provider does not vouch for it
 * (`email_verified` not true), is refused saying so: granted nothing by it, they would meet 403s
 * naming no cause, and the address may be someone else's.
 */
function refuseUnverifiedEmailGrant(identity: IdentityClaims, config: LoadedConfig): void {
  if (identity.emailVerified || emailGrantsFor(identity.email, config.auth) === 0) return;
  throw new ManentError(
    Code.Unauthenticated,
    `the provider does not say that the e-mail address ${identity.email} of ${identity.subject} is verified (email_verified is not true), ` +
      `and auth.grants grants by e-mail need a verified address: verify the address at the provider, or grant this person by subject or group`,
  );
}

/**
 * A person whose groups the provider left out of the token (group overage) and whom manent.yml
 * grants nothing by e-mail or subject is refused, saying why and what to change at the provider:
 * signed in with no groups they would only meet 403s that name no cause. One with grants of their
 * own signs in with those.
 */
function refuseOmittedGroups(identity: IdentityClaims, config: LoadedConfig): void {
  if (!identity.groupsOmitted) return;
  const claim = config.auth.oidc?.groups_claim ?? "groups";
  if (grantsForUser({ ...identity, groups: [] }, config.auth).length > 0) return;
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
      refuseUnusableClaims(claims, config);
      return userPrincipal(claims, config);
    },
  };
}
