import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { assertSampleConformance } from "./conformance.js";
import { buildGoBinaries, type GoBinaries } from "./go-tools.js";
import { runGoHost } from "./gohost.js";

// Go host (hashicorp/go-plugin's own client) ↔ the sample Go plugin (sdk/go external.Serve).
let bins: GoBinaries;
let base: string;
before(async () => {
  bins = await buildGoBinaries();
  base = await mkdtemp(path.join(os.tmpdir(), "manent-interop-go-go-"));
});
after(() => rm(base, { recursive: true, force: true }));

test("Go host runs the conformance script against the Go sample plugin", async () => {
  const report = await runGoHost(bins.gohost, base, [bins.goSample]);
  await assertSampleConformance(report, base);
});
