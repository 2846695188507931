/**
 * Whether a caller may hand a grant to a token it creates: never more than it has itself. A scope
 * pattern is checked as a value (policy.ts's `can`), which is exact for patterns: a grant's `*`
 * also matches a `*` of the pattern, and its literal characters never do, so `team-*` covers
 * `team-a` and `team-a*` but not `*`, and `prod` does not cover `prod*`.
 */
import { Code, ManentError } from "../errors.js";
import { roleActions, type Grant } from "./grants.js";
import { authorize, can } from "./policy.js";
import type { Principal } from "./principal.js";

/**
 * Throws `permission_denied` (403) unless the caller may administer tokens over the whole of the
 * grant's scope and may itself take every action the grant's role allows there.
 */
export function authorizeDelegation(principal: Principal, grant: Grant): void {
  authorize(principal, "token_admin", grant.scope);
  const missing = roleActions[grant.role].filter((a) => !can(principal, a, grant.scope));
  if (missing.length === 0) return;
  const { tenant, application, environment } = grant.scope;
  throw new ManentError(
    Code.PermissionDenied,
    `${principal.name} may not create a token with role ${grant.role} in tenant ${tenant}, application ${application}, environment ${environment}: ` +
      `it would allow ${missing.join(", ")} there, which ${principal.name} may not do`,
    { details: { role: grant.role, tenant, application, environment, missing: missing.join(",") } },
  );
}
