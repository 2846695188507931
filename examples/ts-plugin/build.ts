// Builds the sample plugin bundle: node --import tsx examples/ts-plugin/build.ts [outfile]
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundlePlugin } from "./bundle.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const samplePluginEntry = path.join(here, "main.ts");
export const defaultSamplePluginPath = path.join(here, "../../.tools/bin/manent-ts-sample-plugin");

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = await bundlePlugin(samplePluginEntry, path.resolve(process.argv[2] ?? defaultSamplePluginPath));
  console.log(out);
}
