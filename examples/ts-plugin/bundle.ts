import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { build } from "esbuild";

/**
 * Bundles a TypeScript plugin entry into one self-contained executable file. The host verifies
 * and runs a private copy of the plugin command, so a plugin must not depend on files beside it.
 */
export async function bundlePlugin(entry: string, outfile: string): Promise<string> {
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    write: false,
    minify: false,
    legalComments: "none",
    logLevel: "error",
  });
  const code = out.outputFiles[0]!.text.replace(/^#!.*\n/, "");
  await mkdir(path.dirname(outfile), { recursive: true });
  await writeFile(outfile, `#!/usr/bin/env node\n${code}`);
  await chmod(outfile, 0o755);
  return outfile;
}
