import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { assertSampleConformance } from "./conformance.js";
import { buildGoBinaries, type GoBinaries } from "./go-tools.js";
import { runGoHost } from "./gohost.js";
import { buildTsSample, tsSampleMissing } from "./ts-sample.js";

// Go host (hashicorp/go-plugin's own client) ↔ the sample TypeScript plugin (src/external/sdk
// serve): proves the TS SDK speaks go-plugin's handshake, AutoMTLS and broker as Go does.
const missing = await tsSampleMissing();
let bins: GoBinaries;
let dir: string;
let plugin: string;
before(async () => {
  if (missing) return;
  dir = await mkdtemp(path.join(os.tmpdir(), "manent-interop-go-ts-"));
  [bins, plugin] = await Promise.all([buildGoBinaries(), buildTsSample(dir)]);
});
after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

test("Go host runs the conformance script against the TS sample plugin", { skip: missing }, async () => {
  const base = path.join(dir, "base");
  const report = await runGoHost(bins.gohost, base, [plugin]);
  await assertSampleConformance(report, base);
});
