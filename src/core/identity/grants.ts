/**
 * Roles, the actions they allow, and where: a grant is a role within a scope of tenant, application
 * and environment patterns (`*` matches any run of characters; `prod*`, `team-?` is not a pattern).
 */
export const actions = [
  "read",
  "submit",
  "dry_run",
  "rollback",
  "cancel",
  "approve",
  "promote",
  "abort",
  "plugin_restart",
  "envconfig_refresh",
  "retention_sweep",
  "window_override",
  "audit_read",
  "token_admin",
] as const;
export type Action = (typeof actions)[number];

export const roleNames = ["viewer", "deployer", "approver", "admin"] as const;
export type RoleName = (typeof roleNames)[number];

/** What each built-in role may do. Kept as a table so a reader can check it at a glance (docs/operations/security.md prints it). */
export const roleActions: Record<RoleName, readonly Action[]> = {
  viewer: ["read"],
  deployer: ["read", "dry_run", "submit", "rollback", "cancel", "abort"],
  approver: ["read", "approve", "promote", "abort"],
  admin: actions,
};

/** Where a grant applies; each field a pattern, `*` for any. */
export interface ScopePattern {
  tenant: string;
  application: string;
  environment: string;
}

/** Where an action is taken. A field left out is "any": listing a tenant's deploys has no application. */
export interface Scope {
  tenant: string;
  application?: string;
  environment?: string;
}

export interface Grant {
  role: RoleName;
  scope: ScopePattern;
}

export const everywhere: ScopePattern = { tenant: "*", application: "*", environment: "*" };

/** True when `value` matches `pattern`, where `*` stands for any run of characters and nothing else is special. */
export function matchesPattern(pattern: string, value: string): boolean {
  if (pattern === "*") return true;
  if (!pattern.includes("*")) return pattern === value;
  const parts = pattern.split("*").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".*")}$`, "s").test(value);
}
