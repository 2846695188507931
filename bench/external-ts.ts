// External-plugin benchmark on the TypeScript host: cold start to the first Configure (a restart in
// a server's plugin host, and a start in a fresh host that copies, hashes and makes keys) and the
// round trip of a no-op Deploy (no targets; the Secrets broker service is still set up), for the
// TypeScript sample and, when it builds, the Go sample.
// Usage: node --import tsx bench/external-ts.ts [starts=15] [deploys=1000] [--json]
// With --json the last stdout line is one JSON object of the figures (bench/table.ts reads it).
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { bundlePlugin } from "../examples/ts-plugin/bundle.js";
import { ExternalPlugin, PluginHost } from "../src/external/host/index.js";
import type { Request } from "../src/plugin.js";
import { watchMachine } from "./support/machine-share.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const json = process.argv.includes("--json");
const positionals = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const starts = Number(positionals[0] ?? 15);
const deploys = Number(positionals[1] ?? 1000);
const figures: Record<string, Record<string, number>> = {};
const noop = () => {};
const logger = { debug: noop, info: noop, warn: noop, error: noop };

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
}

function noopRequest(base: string): Request {
  return {
    deploymentId: "bench",
    tenant: "t",
    application: "a",
    environment: "e",
    artifact: { type: "file", name: "x", version: "1", source: "x" },
    targets: [],
    params: { base },
    secrets: { secret: async () => "k" },
    parallelism: 1,
    logger,
    signal: new AbortController().signal,
  };
}

async function bench(label: string, key: string, command: string, tmp: string): Promise<void> {
  const entry = {
    external: {
      command,
      sha256: createHash("sha256")
        .update(await readFile(command))
        .digest("hex"),
    },
  };
  // As in a server: its plugins share one PluginHost, whose identity is made while the server
  // starts and whose private copy of a binary is made and checked at the plugin's first start.
  const host = await PluginHost.create({ workdir: path.join(tmp, `work-${key}`) });
  host.acquire();
  await host.identity();
  const activate = (shared?: PluginHost) =>
    ExternalPlugin.activate({ name: "bench", entry, baseDir: tmp, logger, ...(shared && { host: shared }) });
  const coldStart = async (shared?: PluginHost): Promise<number> => {
    const p = await activate(shared);
    const t0 = performance.now();
    await p.capabilities();
    const ms = performance.now() - t0;
    await p.close();
    return ms;
  };
  // A start in a fresh host each time: private copy with its sha256 and key generation included.
  const first: number[] = [];
  for (let i = 0; i < starts; i++) first.push(await coldStart());
  // Starts in the server's host: the first one makes the copy, later ones reuse it.
  await coldStart(host);
  const cold: number[] = [];
  for (let i = 0; i < starts; i++) cold.push(await coldStart(host));
  const p = await activate(host);
  const d = await p.deployer();
  const req = noopRequest(path.join(tmp, "targets"));
  for (let i = 0; i < 50; i++) await d.deploy(req); // warm-up
  const rtt: number[] = [];
  for (let i = 0; i < deploys; i++) {
    const t0 = performance.now();
    await d.deploy(req);
    rtt.push(performance.now() - t0);
  }
  // A secret looked up through the broker from inside a Deploy: the sample plugins read one secret
  // per Deploy that has targets (none without), before any target. With `fail_host` naming the one
  // target, the target fails at once without touching files, so a 1-target Deploy's round trip less
  // a 0-target one's is the lookup plus one failed target's result: an upper bound of the lookup.
  const oneTarget: Request = { ...req, params: { ...req.params, fail_host: "t1" }, targets: [{ host: "t1", labels: {} }] };
  const deployOne = () => d.deploy(oneTarget).catch(() => undefined); // the target's failure is expected
  for (let i = 0; i < 20; i++) await deployOne(); // warm-up
  const withLookup: number[] = [];
  for (let i = 0; i < Math.max(50, Math.round(deploys / 4)); i++) {
    const t0 = performance.now();
    await deployOne();
    withLookup.push(performance.now() - t0);
  }
  const lookup = Math.max(0, quantile(withLookup, 0.5) - quantile(rtt, 0.5));
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 200 }, () => d.deploy(noopRequest(path.join(tmp, "targets")))));
  const concurrent = performance.now() - t0;
  await p.close();
  await host.release();
  const round = (x: number): number => Math.round(x * 1000) / 1000;
  figures[key] = {
    cold_start_ms_p50: round(quantile(cold, 0.5)),
    cold_start_first_ms_p50: round(quantile(first, 0.5)),
    deploy_rtt_ms_p50: round(quantile(rtt, 0.5)),
    deploy_rtt_ms_p99: round(quantile(rtt, 0.99)),
    concurrent_200_ms: round(concurrent),
    deploy_1_target_rtt_ms_p50: round(quantile(withLookup, 0.5)),
    secret_lookup_ms_p50: round(lookup),
  };
  console.log(
    `${label}: cold start to Configure median ${quantile(cold, 0.5).toFixed(1)} ms in the server's host, ` +
      `${quantile(first, 0.5).toFixed(1)} ms in a fresh host (private copy, sha256, keys) (n=${starts}); ` +
      `no-op Deploy round trip median ${quantile(rtt, 0.5).toFixed(2)} ms, p99 ${quantile(rtt, 0.99).toFixed(2)} ms (n=${deploys}); ` +
      `200 concurrent no-op Deploys in ${concurrent.toFixed(0)} ms; ` +
      `secret lookup inside a Deploy at most ${lookup.toFixed(2)} ms (1 failing target ${quantile(withLookup, 0.5).toFixed(2)} ms less no target)`,
  );
}

const tmp = await mkdtemp(path.join(os.tmpdir(), "manent-bench-ext-"));
const machine = watchMachine();
try {
  console.log(`node ${process.version}, ${os.cpus().length} cpus (${os.cpus()[0]?.model ?? "?"})`);
  await bench(
    "TS sample plugin",
    "ts_sample",
    await bundlePlugin(path.join(root, "examples/ts-plugin/main.ts"), path.join(tmp, "ts-sample")),
    tmp,
  );
  let go = [".tools/bin/manent-go-sample-plugin", ".tools/bin/manent-plugin-go-sample"]
    .map((p) => path.join(root, p))
    .find((p) => existsSync(p));
  if (process.env.BENCH_GO_BUILD !== "0") {
    // A fresh build, so the figures are for the current sources.
    const out = path.join(tmp, "go-sample");
    go = await promisify(execFile)("go", ["build", "-o", out, "."], { cwd: path.join(root, "examples/go-plugin") }).then(
      () => out,
      () => go,
    );
  }
  if (go) await bench("Go sample plugin", "go_sample", go, tmp);
  else console.log("Go sample plugin: not built (no go toolchain, no .tools/bin/manent-plugin-go-sample)");
} finally {
  await rm(tmp, { recursive: true, force: true });
}
const share = machine.report();
if (json) console.log(JSON.stringify({ ...share, bench: "external-ts", starts, deploys, ...figures }));
