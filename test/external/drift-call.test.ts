import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isDriftInspector } from "../../src/plugin.js";
import { ExternalPlugin } from "../../src/external/host/index.js";
import { buildFixture, mapSecrets, recordingLogger, request, tempDir } from "./helpers.js";

/** The Drift call through the TypeScript SDK (serve) and host, over go-plugin gRPC with the broker's Secrets service. */
describe("the Drift call of an external TypeScript plugin", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let probe: string;
  const plugins: ExternalPlugin[] = [];
  const activate = async (config: Record<string, unknown>) => {
    const p = await ExternalPlugin.activate({
      name: "probe",
      entry: { external: { command: probe }, ...config },
      baseDir: t.dir,
      logger: recordingLogger(),
    });
    plugins.push(p);
    return p;
  };

  before(async () => {
    t = await tempDir();
    probe = await buildFixture("probe-plugin", t.dir);
  });
  after(async () => {
    for (const p of plugins) await p.close();
    await t.cleanup();
  });

  it("is declared as the drift capability and answers per target, reading a secret during the call", async () => {
    const plugin = await activate({ drift: true });
    assert.ok((await plugin.capabilities()).includes("drift"));
    const d = await plugin.deployer();
    assert.ok(isDriftInspector(d));
    const secrets = mapSecrets({ "deploy-key": "k" });
    const targets = [
      { host: "h", name: "a", labels: { runs: "1.0.0" } },
      { host: "h", name: "b", labels: { runs: "0.9.0" } },
    ];
    const found = await d.drift(request({ targets, secrets }));
    assert.deepEqual(found, [
      { host: "a", status: "in_sync", version: "1.0.0", changes: [], details: { checked_by: "probe" } },
      {
        host: "b",
        status: "drifted",
        version: "0.9.0",
        changes: [{ object: "release", field: "version", expected: "1.0.0", live: "0.9.0" }],
        details: { checked_by: "probe" },
      },
    ]);
    assert.deepEqual(secrets.asked, ["deploy-key"]);
  });

  it("is absent from a plugin that does not implement it: no capability, no method", async () => {
    const plugin = await activate({});
    assert.ok(!(await plugin.capabilities()).includes("drift"));
    assert.ok(!isDriftInspector(await plugin.deployer()));
  });
});
