import { actions, roleActions, roleNames } from "../../src/core/identity/grants.js";

/** The built-in roles and their actions as a Markdown table, from `roleActions` (docs/operations/security.md shows it; a test compares). */
export function rolesTable(): string {
  const header = `| Action | ${roleNames.join(" | ")} |`;
  const rule = `|---|${roleNames.map(() => "---").join("|")}|`;
  const rows = actions.map((a) => `| \`${a}\` | ${roleNames.map((r) => (roleActions[r].includes(a) ? "yes" : "")).join(" | ")} |`);
  return [header, rule, ...rows].join("\n");
}
