/**
 * The one place that decides whether a caller may take an action somewhere. Routes ask `authorize`
 * (403 naming the missing permission) after they have found what the caller may see at all
 * (`mayRead`; what it may not see is reported missing, 404, never forbidden).
 */
import { Code, ManentError } from "../errors.js";
import { matchesPattern, roleActions, roleNames, type Action, type Grant, type Scope } from "./grants.js";
import type { Principal } from "./principal.js";

function grantCovers(grant: Grant, action: Action, scope: Scope): boolean {
  if (!roleActions[grant.role].includes(action)) return false;
  const field = (pattern: string, value: string | undefined) => (value === undefined ? pattern === "*" : matchesPattern(pattern, value));
  return (
    field(grant.scope.tenant, scope.tenant) &&
    field(grant.scope.application, scope.application) &&
    field(grant.scope.environment, scope.environment)
  );
}

/** True when one of the caller's grants allows `action` at `scope` (a field left out of `scope` needs a grant for any value). */
export function can(principal: Principal, action: Action, scope: Scope): boolean {
  return principal.grants.some((g) => grantCovers(g, action, scope));
}

/** The first of the caller's grants that allows `action` at `scope` (what `manent auth can-i` shows as the reason), if any. */
export function allowingGrant(principal: Principal, action: Action, scope: Scope): Grant | undefined {
  return principal.grants.find((g) => grantCovers(g, action, scope));
}

/** True when the caller may take `action` somewhere in `tenant` (for lists, which then filter row by row with `can`). */
export function canSomewhereIn(principal: Principal, action: Action, tenant: string): boolean {
  return principal.grants.some((g) => roleActions[g.role].includes(action) && matchesPattern(g.scope.tenant, tenant));
}

/** True when the caller may see what is at `scope`; what it may not see is reported as not found. */
export function mayRead(principal: Principal, scope: Scope): boolean {
  return can(principal, "read", scope);
}

/** The roles that allow an action, for messages ("approver or admin"). */
export function rolesAllowing(action: Action): string[] {
  return roleNames.filter((r) => roleActions[r].includes(action));
}

function describeScope(scope: Scope): string {
  return [
    `tenant ${scope.tenant}`,
    scope.application === undefined ? "" : `application ${scope.application}`,
    scope.environment === undefined ? "" : `environment ${scope.environment}`,
  ]
    .filter(Boolean)
    .join(", ");
}

/** Throws `permission_denied` (HTTP 403) naming the caller, the action, where, and the roles that would allow it. */
export function authorize(principal: Principal, action: Action, scope: Scope): void {
  if (!can(principal, action, scope)) throw refusal(principal, action, scope);
}

/** The `permission_denied` error `authorize` throws, for a caller that reports it rather than throws it (`manent auth can-i`). */
export function refusal(principal: Principal, action: Action, scope: Scope): ManentError {
  const roles = rolesAllowing(action);
  // A role that has the permission, granted elsewhere: the scope is what is missing, and said so.
  const elsewhere = principal.grants.filter((g) => roleActions[g.role].includes(action));
  const where = elsewhere.length
    ? `; ${elsewhere.map((g) => `its role ${g.role} has it only in ${describeScope(g.scope)}`).join("; ")}`
    : "";
  return new ManentError(
    Code.PermissionDenied,
    `${principal.name} may not ${action} in ${describeScope(scope)}: needs the ${action} permission (role ${roles.join(" or ")})${where}`,
    {
      details: {
        action,
        tenant: scope.tenant,
        ...(scope.application === undefined ? {} : { application: scope.application }),
        ...(scope.environment === undefined ? {} : { environment: scope.environment }),
      },
    },
  );
}

/** A grant as people read it: "role deployer in tenant team-a, application *, environment dev*". */
export function describeGrant(grant: Grant): string {
  return `role ${grant.role} in tenant ${grant.scope.tenant}, application ${grant.scope.application}, environment ${grant.scope.environment}`;
}
