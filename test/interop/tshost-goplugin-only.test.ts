import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { ExternalPlugin } from "../../src/external/index.js";
import type { Request, Result } from "../../src/plugin.js";
import { buildGoBinaries, repoRoot, type GoBinaries } from "./go-tools.js";

// manent's TypeScript host ↔ a plugin built on hashicorp/go-plugin alone (no manent SDK):
// it does not know the Secrets session, so it must keep getting a broker id per call and read
// its secrets by dialling it, exactly as go-plugin's GRPCBroker.Dial does.
const noop = () => {};
const logger = { debug: noop, info: noop, warn: noop, error: noop };

let bins: GoBinaries;
let plugin: ExternalPlugin | undefined;
before(async () => {
  bins = await buildGoBinaries();
});
after(() => plugin?.close());

function request(params: Record<string, string>, secret: string): Request & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    deploymentId: "d-1",
    tenant: "acme",
    application: "web",
    environment: "prod",
    artifact: { type: "file", name: "web", version: "1", source: "inline" },
    targets: [{ host: "web1", labels: {} }],
    params,
    secrets: {
      async secret(name: string) {
        asked.push(name);
        return secret;
      },
    },
    parallelism: 1,
    logger,
    signal: new AbortController().signal,
  };
}

test("TS host serves secrets per call to a go-plugin-only plugin, and refuses a lookup on an ended call's connection", async () => {
  const { ExternalPlugin } = await import("../../src/external/index.js");
  plugin = await ExternalPlugin.activate({
    name: "goplugin-only",
    entry: { external: { command: bins.goPluginOnly, start_timeout: "30s" } },
    baseDir: repoRoot,
    logger,
  });
  const d = await plugin.deployer();
  const details = (r: Result) => r.targets[0]?.details ?? {};

  const first = request({ secret: "deploy-key" }, "first-value");
  const r1 = await d.deploy(first);
  assert.equal(details(r1).secret, "first-value", "the secret read through the call's broker id");
  assert.deepEqual(first.asked, ["deploy-key"]);

  // The second call reads its own secret; the plugin first tries the first call's connection,
  // which the host closed when that call returned.
  const second = request({ secret: "deploy-key", late: "1" }, "second-value");
  const r2 = await d.deploy(second);
  assert.equal(details(r2).secret, "second-value");
  assert.match(String(details(r2).late), /^refused: /, `a lookup on the ended call's connection: ${details(r2).late}`);
  assert.deepEqual(second.asked, ["deploy-key"], "the refused late lookup never reached the accessor");
});
