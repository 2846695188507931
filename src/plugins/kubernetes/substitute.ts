import { Code, ManentError } from "../../core/errors.js";

/**
 * Replaces `${NAME}` in manifest text. `$${` stays a literal `${`, so a manifest can carry shell
 * syntax. A variable nobody set is an error, not an empty string: an empty replica count or
 * image tag would apply and break later, far from the cause.
 */
export function substitute(text: string, vars: Record<string, string>, file: string): string {
  const missing = new Set<string>();
  const out = text.replace(/\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, escape: string, name: string) => {
    if (escape) return whole.slice(1);
    const value = vars[name];
    if (value === undefined) {
      missing.add(name);
      return whole;
    }
    return value;
  });
  if (missing.size > 0) {
    const names = [...missing];
    throw new ManentError(
      Code.InvalidArgument,
      `kubernetes: ${file}: unknown variable ${names.map((n) => `\${${n}}`).join(", ")} (set it with param ${names.map((n) => `var.${n}`).join(", ")})`,
      { details: { file, variables: names.join(",") } },
    );
  }
  return out;
}
