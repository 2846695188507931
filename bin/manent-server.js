#!/usr/bin/env node
// Runs the bundled JavaScript in dist/bundle/ (built by `npm ci`'s prepare script, scripts/build-js.mjs).
// A checkout where dist/ was never built runs the TypeScript sources through tsx (a development
// dependency) instead; see CONTRIBUTING.md ("Edit, build, run") for when dist/ is rebuilt.
import { existsSync } from "node:fs";
const dist = new URL("../dist/bundle/server.js", import.meta.url);
let entry = dist.href;
if (!existsSync(dist)) {
  const { register } = await import("tsx/esm/api");
  register();
  entry = new URL("../src/server/main.ts", import.meta.url).href;
}
const { main } = await import(entry);
await main(process.argv);
