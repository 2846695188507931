import { everywhere, roleActions, type Action, type Principal, type Scope, type ScopePattern } from "../../core/identity/index.js";

/** Where a deploy is, for a permission check. */
export function deployScope(d: { tenant: string; application: string; environment: string }): Scope {
  return { tenant: d.tenant, application: d.application, environment: d.environment };
}

/**
 * Where a submitted descriptor would deploy, read before it is validated (the engine validates it
 * next): a field that is not a string is left out, so only a grant for any value allows it.
 */
export function descriptorScope(descriptor: Record<string, unknown>): Scope {
  const text = (v: unknown) => (typeof v === "string" ? v : undefined);
  const application = text(descriptor.application);
  const environment = text(descriptor.environment);
  return {
    tenant: text(descriptor.tenant) ?? "untenanted",
    ...(application !== undefined && { application }),
    ...(environment !== undefined && { environment }),
  };
}

/** The scopes where the caller may take `action`, for lists filtered in their query (everything: one scope of `*`). */
export function scopesFor(principal: Principal, action: Action): ScopePattern[] {
  const scopes = principal.grants.filter((g) => roleActions[g.role].includes(action)).map((g) => g.scope);
  return scopes.some((s) => s.tenant === "*" && s.application === "*" && s.environment === "*") ? [everywhere] : scopes;
}

/** The one tenant all of the caller's grants name, if they name exactly one (a tenant's token): the default tenant of its uploads. */
export function onlyTenant(principal: Principal): string | undefined {
  const tenants = new Set(principal.grants.map((g) => g.scope.tenant));
  const [tenant] = tenants;
  return tenants.size === 1 && tenant !== undefined && !tenant.includes("*") ? tenant : undefined;
}
