import type { ScopePattern } from "../core/identity/index.js";

/** The columns a scope's tenant, application and environment patterns are matched against. */
export interface ScopeColumns {
  tenant: string;
  application: string;
  environment: string;
}

const defaultColumns: ScopeColumns = { tenant: "tenant", application: "application", environment: "environment" };

/**
 * A SQL condition true for the rows within any of `scopes` (what a caller may read), so lists
 * filter in the query and their limits count only what is shown. Patterns become LIKE patterns
 * passed as parameters (`*` is `%`; `%`, `_` and `\` match themselves). `undefined`: no condition
 * is needed (a scope covers everything); an empty list matches nothing.
 */
export function scopeCondition(
  scopes: readonly ScopePattern[],
  args: unknown[],
  columns: ScopeColumns = defaultColumns,
): string | undefined {
  const alternatives: string[] = [];
  for (const scope of scopes) {
    const parts: string[] = [];
    for (const field of ["tenant", "application", "environment"] as const) {
      const pattern = scope[field];
      if (pattern === "*") continue;
      parts.push(`${columns[field]} like $${args.push(likePattern(pattern))}`);
    }
    if (parts.length === 0) return undefined;
    alternatives.push(`(${parts.join(" and ")})`);
  }
  return alternatives.length === 0 ? "false" : `(${alternatives.join(" or ")})`;
}

function likePattern(pattern: string): string {
  return pattern.replace(/[\\%_]/g, "\\$&").replace(/\*/g, "%");
}
