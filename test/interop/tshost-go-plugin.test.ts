import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import type { Logger } from "../../src/plugin.js";
import { assertSampleConformance } from "./conformance.js";
import { buildGoBinaries, exists, repoRoot, type GoBinaries } from "./go-tools.js";
import { runTsHostScript } from "./tshost-script.js";

// manent's TypeScript host (src/external, the engine's ExternalPlugin) ↔ the sample Go plugin
// (sdk/go external.Serve): the pairing production uses for Go plugins.
const hostModule = path.join(repoRoot, "src/external/host/external-plugin.ts");
const missing = (await exists(hostModule)) ? undefined : "the TypeScript host (src/external/host/external-plugin.ts) does not exist yet";

interface Logged {
  level: string;
  msg: string;
  attrs: Record<string, unknown>;
}
function recordingLogger(): Logger & { entries: Logged[] } {
  const entries: Logged[] = [];
  const at =
    (level: string) =>
    (msg: string, attrs: Record<string, unknown> = {}) =>
      void entries.push({ level, msg, attrs });
  return { entries, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

let bins: GoBinaries;
let dir: string;
before(async () => {
  if (missing) return;
  bins = await buildGoBinaries();
  dir = await mkdtemp(path.join(os.tmpdir(), "manent-interop-ts-go-"));
});
after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

test("TS host runs the conformance script against the Go sample plugin", { skip: missing }, async () => {
  const { ExternalPlugin } = await import("../../src/external/index.js");
  const logger = recordingLogger();
  const plugin = await ExternalPlugin.activate({
    name: "sample-go-ext",
    entry: { external: { command: bins.goSample, start_timeout: "30s" }, name: "sample-go-ext" },
    baseDir: repoRoot,
    logger,
  });
  try {
    const capabilities = await plugin.capabilities();
    const deployer = await plugin.deployer();
    assert.equal(deployer.name(), "sample-go-ext", "the plugin's configuration reaches its Factory");
    const base = path.join(dir, "base");
    const report = await runTsHostScript(deployer, capabilities, base, logger);
    await assertSampleConformance(report, base);

    // The Go plugin's slog lines (hclog JSON on stderr) reach the host's logger with their
    // attributes, kept apart under plugin_fields.
    const fields = (e: Logged) => (e.attrs.plugin_fields ?? {}) as Record<string, unknown>;
    const deployed = logger.entries.find((e) => e.msg === "target deployed" && fields(e).host === "alpha" && fields(e).version === "v1");
    assert.ok(
      deployed,
      `the plugin's "target deployed" log line for alpha was not forwarded: ${JSON.stringify(logger.entries.map((e) => e.msg))}`,
    );
    assert.equal(deployed.level, "info");
    // parallel_targets declared: the host's parallelism reaches the plugin's Request.
    const started = logger.entries.find((e) => e.msg === "deploy started" && fields(e).deployment === "dep-v1");
    assert.ok(started, 'the plugin\'s "deploy started" line');
    assert.equal(fields(started).parallelism, 2, "Request.parallelism as the Go plugin saw it");
  } finally {
    await plugin.close();
  }
});
