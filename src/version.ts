import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

/** manent's version, from package.json. */
export const version: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;

/**
 * The DBOS application version of this build's workflows: DBOS recovers a workflow only under the
 * version that started it, so each build needs its own (engine/version-upgrade.ts). It is package
 * version plus commit, written by scripts/build-js.mjs into dist/build-info.json next to this module;
 * without that file (running src/ through tsx, a checkout built without git) the package version.
 * MANENT_APPLICATION_VERSION overrides it, for tests that stand two builds side by side.
 */
export function applicationVersion(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.MANENT_APPLICATION_VERSION?.trim();
  if (override) return override;
  try {
    const built = (JSON.parse(readFileSync(new URL("./build-info.json", import.meta.url), "utf8")) as { version?: unknown }).version;
    if (typeof built === "string" && built !== "") return built;
  } catch {
    // not built by scripts/build-js.mjs
  }
  return version;
}
