import type { EnvconfigOrigin } from "../core/config/index.js";

/** Where a deploy's envconfig came from, in one line: `git envconfig/a.yml@3f2c1a9e0b12 (main, ssh://…) sha256 9d1e…`. */
export function envconfigOrigin(o: EnvconfigOrigin): string {
  const sha = `sha256 ${o.sha256.slice(0, 12)}`;
  if (o.provider !== "git") return `${o.provider} ${o.path} ${sha}`;
  return `git ${o.path}@${o.commit?.slice(0, 12) ?? "?"} (${[o.ref, o.repository].filter(Boolean).join(", ")}) ${sha}`;
}
