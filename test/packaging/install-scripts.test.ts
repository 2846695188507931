import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { repoRoot } from "../support/server-process.js";

interface LockedPackage {
  hasInstallScript?: boolean;
  os?: string[];
  cpu?: string[];
}

/**
 * `npm ci` warns about every dependency with an install script that package.json's allowScripts
 * does not decide (run it, or skip it as reviewed): lines a newcomer cannot act on. Every such
 * package npm installs on this platform is decided.
 */
it("decides the install script of every dependency npm installs here", () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { allowScripts?: Record<string, boolean> };
  const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, LockedPackage> };
  const matches = (list: string[] | undefined, value: string) =>
    !list || list.some((v) => (v.startsWith("!") ? v.slice(1) !== value : v === value));
  const withScripts = Object.entries(lock.packages)
    .filter(([path, p]) => path !== "" && p.hasInstallScript && matches(p.os, process.platform) && matches(p.cpu, process.arch))
    .map(([path]) => path.replace(/^.*node_modules\//, ""));
  assert.ok(withScripts.includes("esbuild"), "esbuild has an install script: the lockfile was not read");
  const allowed = pkg.allowScripts ?? {};
  assert.deepEqual(
    withScripts.filter((name) => !(name in allowed)),
    [],
    "install scripts neither allowed nor denied in package.json allowScripts",
  );
});
