import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { alive, buildSamplePlugin, repoRoot, tempDir, waitGone } from "./helpers.js";

/** Starts a host process running `command`, returns the host and the plugin pid it started. */
async function startHost(command: string, parentDeathSignal: boolean) {
  const host = spawn(
    process.execPath,
    ["--import", "tsx", path.join(repoRoot, "test/external/fixtures/host-runner.ts"), command, String(parentDeathSignal)],
    {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const [line] = (await once(createInterface({ input: host.stdout! }), "line")) as [string];
  return { host, pluginPid: (JSON.parse(line) as { pid: number }).pid };
}

describe("no plugin outlives a killed host", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let sample: string;
  let goSample: string | undefined;
  before(async () => {
    t = await tempDir();
    sample = await buildSamplePlugin(t.dir);
    const out = path.join(t.dir, "go-sample");
    goSample = await promisify(execFile)("go", ["build", "-o", out, "."], { cwd: path.join(repoRoot, "examples/go-plugin") }).then(
      () => out,
      () => undefined,
    );
  });
  after(() => t.cleanup());

  const cases: [string, () => string | undefined, boolean][] = [
    ["TypeScript plugin, parent-death signal", () => sample, true],
    ["TypeScript plugin, stdin EOF only (the SDK's own check)", () => sample, false],
    ["Go plugin (go-plugin), parent-death signal", () => goSample, true],
  ];
  for (const [what, command, pdeath] of cases) {
    it(what, async (ctx) => {
      const cmd = command();
      if (!cmd) return ctx.skip("go toolchain unavailable: examples/go-plugin did not build");
      const { host, pluginPid } = await startHost(cmd, pdeath);
      assert.ok(alive(pluginPid));
      host.kill("SIGKILL");
      await once(host, "exit");
      assert.ok(await waitGone(pluginPid, 5_000), `plugin ${pluginPid} outlived its host by more than 5 s`);
    });
  }
});
