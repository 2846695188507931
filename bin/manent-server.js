#!/usr/bin/env node
// Runs from the TypeScript sources in a checkout, from dist/ in an installed package.
import { existsSync } from "node:fs";
const src = new URL("../src/server/main.ts", import.meta.url);
let entry;
if (existsSync(src)) {
  const { register } = await import("tsx/esm/api");
  register();
  entry = src.href;
} else entry = new URL("../dist/server/main.js", import.meta.url).href;
const { main } = await import(entry);
await main(process.argv);
