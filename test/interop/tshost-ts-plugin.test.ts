import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import type { Logger } from "../../src/plugin.js";
import { assertSampleConformance } from "./conformance.js";
import { repoRoot } from "./go-tools.js";
import { buildTsSample, tsSampleMissing } from "./ts-sample.js";
import { runTsHostScript } from "./tshost-script.js";

// manent's TypeScript host (src/external, the engine's ExternalPlugin) ↔ the sample TypeScript
// plugin (src/external/sdk serve): both ends of the pairing a TypeScript shop runs.
const missing = await tsSampleMissing();
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

let dir: string;
let plugin: string;
before(async () => {
  if (missing) return;
  dir = await mkdtemp(path.join(os.tmpdir(), "manent-interop-ts-ts-"));
  plugin = await buildTsSample(dir);
});
after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

test("TS host runs the conformance script against the TS sample plugin", { skip: missing }, async () => {
  const { ExternalPlugin } = await import("../../src/external/index.js");
  const p = await ExternalPlugin.activate({
    name: "sample-ts-ext",
    entry: { external: { command: plugin, start_timeout: "30s" }, name: "sample-ts-ext" },
    baseDir: repoRoot,
    logger: quiet,
  });
  try {
    const capabilities = await p.capabilities();
    const deployer = await p.deployer();
    assert.equal(deployer.name(), "sample-ts-ext", "the plugin's configuration reaches its factory");
    const base = path.join(dir, "base");
    const report = await runTsHostScript(deployer, capabilities, base, quiet);
    await assertSampleConformance(report, base);
  } finally {
    await p.close();
  }
});
