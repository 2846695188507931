import { decodeJwt, type JWTPayload } from "jose";
import { unsafeText } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { Principal } from "../../core/identity/index.js";
import { bearerToken, type CredentialCheck } from "../identity/index.js";
import { matchWorkload, shown } from "./workload-match.js";
import type { WorkloadIssuers } from "./workload-issuers.js";

/**
 * A CI job's own ID token (auth.workload_identities): its issuer must be a trusted one, its
 * signature, audience and lifetime verify against that issuer's keys, and its claims must match
 * at least one entry; the job is then `workload:<issuer>#<sub>` with the entries' roles. A token
 * of another issuer is left to the other checks (a person's, of auth.oidc); with no auth.oidc, it
 * is refused here naming its issuer. `peopleIssuer`: auth.oidc's issuer, whose tokens for the
 * people's clients are the people check's.
 */
export function workloadIdentityCheck(issuers: WorkloadIssuers, peopleIssuer: string | undefined): CredentialCheck {
  const refuse = (why: string) => new ManentError(Code.Unauthenticated, `CI job's ID token refused: ${why}`);
  return {
    name: "CI workload identity",
    async check(request) {
      const token = bearerToken(request.authorization);
      if (token === undefined || !/^[\w-]+\.[\w-]*\.[\w-]*$/.test(token)) return undefined;
      let unverified: JWTPayload;
      try {
        unverified = decodeJwt(token);
      } catch {
        return undefined;
      }
      const trusted = issuers.find(unverified.iss);
      if (!trusted) {
        if (peopleIssuer !== undefined) return undefined;
        throw refuse(`issued by ${shown(String(unverified.iss ?? null))}, which no auth.workload_identities entry trusts`);
      }
      // Checked before the signature, so a stranger's token never makes the server fetch the issuer's keys.
      const audiences = [...new Set(trusted.entries.map((e) => e.audience))];
      const tokenAudiences = (Array.isArray(unverified.aud) ? unverified.aud : [unverified.aud]).filter((a) => typeof a === "string");
      if (!tokenAudiences.some((a) => audiences.includes(a))) {
        // A person's token from the issuer auth.oidc trusts too: the people check's to accept or refuse.
        if (peopleIssuer !== undefined && sameIssuer(peopleIssuer, String(unverified.iss))) return undefined;
        throw refuse(
          `issued for audience ${tokenAudiences.map(shown).join(", ") || "(none)"}, and auth.workload_identities trusts ${String(unverified.iss)} for ${audiences.join(", ")} only`,
        );
      }
      const claims = await (await trusted.verifier()).verifiedClaims(token, audiences);
      const sub = claims.sub!;
      const bad = unsafeText(sub, 512);
      if (bad !== undefined) throw refuse(`its subject is unusable: ${bad}`);
      const match = matchWorkload(trusted.entries, claims);
      if (match.matched.length === 0) {
        throw refuse(
          `${shown(sub)} of ${claims.iss} matches no auth.workload_identities entry (${"reasons" in match ? match.reasons.join("; ") : ""})`,
        );
      }
      const principal: Principal = {
        kind: "workload",
        id: `workload:${claims.iss}#${sub}`,
        name: sub,
        groups: [],
        grants: "grants" in match ? match.grants : [],
      };
      return principal;
    },
  };
}

function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}
