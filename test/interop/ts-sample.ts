import path from "node:path";
import { exists, repoRoot } from "./go-tools.js";

const entry = path.join(repoRoot, "examples/ts-plugin/main.ts");
const bundler = path.join(repoRoot, "examples/ts-plugin/bundle.ts");

/** Why the TS sample plugin cannot be built yet, or undefined when it can. */
export async function tsSampleMissing(): Promise<string | undefined> {
  if (!(await exists(entry)) || !(await exists(bundler)))
    return "the TypeScript sample plugin (examples/ts-plugin/main.ts, bundle.ts) does not exist yet";
  return undefined;
}

/**
 * Bundles the TS sample plugin into one executable file in `dir`, as the TS helper's own tests
 * do: a plugin command must be self-contained.
 */
export async function buildTsSample(dir: string): Promise<string> {
  // A specifier relative to this module (not the path above): the runner's processes load the
  // tests compiled beside their imports (scripts/compile-tests.mjs), and Node cannot load a .ts path.
  const { bundlePlugin } = await import("../../examples/ts-plugin/bundle.js");
  return bundlePlugin(entry, path.join(dir, "manent-ts-sample-plugin"));
}
