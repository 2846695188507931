import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Registry } from "prom-client";
import { capabilitiesOf, Code, isPermanent, ManentError, ResultError, type Deployer } from "../../src/plugin.js";
import { ExternalPlugin } from "../../src/external/host/index.js";
import { remoteDeployer, type CallRunner } from "../../src/external/host/remote-deployer.js";
import { alive, buildSamplePlugin, mapSecrets, pluginFields, recordingLogger, request, tempDir, waitGone } from "./helpers.js";

describe("external plugin host with the TypeScript sample", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let bin: string;
  let plugin: ExternalPlugin;
  let deployer: Deployer;
  const logger = recordingLogger();
  const registry = new Registry();
  let base: string;

  before(async () => {
    t = await tempDir();
    bin = await buildSamplePlugin(t.dir);
    base = path.join(t.dir, "targets");
    plugin = await ExternalPlugin.activate({
      name: "files",
      entry: { external: { command: bin }, name: "files-ts" },
      baseDir: t.dir,
      logger,
      registry,
    });
    deployer = await plugin.deployer();
  });
  after(async () => {
    await plugin.close();
    await t.cleanup();
  });

  it("starts on first use and announces the capabilities from Configure", async () => {
    assert.deepEqual(await plugin.capabilities(), [
      "dry_run",
      "current_release",
      "rollback",
      "slots",
      "traffic_router",
      "testers",
      "scale",
      "parallel_targets",
    ]);
    assert.deepEqual(capabilitiesOf(deployer), [
      "dry_run",
      "current_release",
      "rollback",
      "slots",
      "traffic_router",
      "testers",
      "scale",
      "parallel_targets",
    ]);
    assert.equal(deployer.name(), "files");
    assert.match(await registry.metrics(), /manent_plugin_up\{plugin="files"\} 1/);
  });

  it("warns at activation when no sha256 is configured", () => {
    assert.ok(logger.entries.some((e) => e.level === "warn" && /no sha256/.test(e.msg) && e.attrs.plugin === "files"));
  });

  it("deploys with a secret served only during the call, on parallel targets", async () => {
    const secrets = mapSecrets({ "deploy-key": "s3cret" });
    const targets = ["a", "b", "c"].map((host) => ({ host, labels: {} }));
    const res = await deployer.deploy(request({ targets, params: { base }, secrets, parallelism: 3 }));
    assert.equal(res.plugin, "files-ts");
    assert.deepEqual(
      res.targets.map((r) => [r.host, r.status]),
      [
        ["a", "deployed"],
        ["b", "deployed"],
        ["c", "deployed"],
      ],
    );
    assert.deepEqual(secrets.asked, ["deploy-key"]);
    const hash = createHash("sha256").update("s3cret").digest("hex");
    for (const host of ["a", "b", "c"]) {
      assert.equal(await readFile(path.join(base, host, "current"), "utf8"), "1.0.0\n");
      assert.equal(await readFile(path.join(base, host, "key.sha256"), "utf8"), `${hash}\n`);
    }
  });

  it("forwards the plugin's hclog lines with level, message and attributes", async () => {
    const e = await logger.waitFor((e) => e.msg === "deploy started");
    assert.equal(e.level, "info");
    assert.equal(e.attrs.plugin, "files");
    assert.equal(pluginFields(e).parallelism, 3);
    assert.equal(pluginFields(e).deployment, "d-1");
  });

  it("runs dry-run, current release and rollback", async () => {
    const targets = [{ host: "a", labels: {} }];
    const dry = await (deployer as Deployer & { dryRun: Deployer["deploy"] }).dryRun(
      request({ targets, params: { base }, artifact: { type: "file", name: "shop", version: "2.0.0", source: "x" } }),
    );
    assert.deepEqual(
      dry.targets.map((r) => [r.status, r.details?.current]),
      [["ready", "1.0.0"]],
    );
    const d = deployer as Deployer & {
      currentRelease(r: unknown): Promise<{ host: string; version: string }[]>;
      rollback(r: unknown): Promise<{ targets: { status: string }[] }>;
    };
    assert.deepEqual(await d.currentRelease(request({ targets, params: { base } })), [{ host: "a", version: "1.0.0" }]);
    const rb = await d.rollback({ ...request({ targets, params: { base } }), releases: [{ host: "a", version: "0.9.0" }] });
    assert.equal(rb.targets[0]!.status, "rolled_back");
    assert.equal(await readFile(path.join(base, "a", "current"), "utf8"), "0.9.0\n");
  });

  it("keeps a permanent error permanent, naming the param", async () => {
    await assert.rejects(deployer.deploy(request({ params: { base: "relative" } })), (err: unknown) => {
      assert.ok(err instanceof ManentError);
      assert.equal(err.code, Code.Aborted);
      assert.ok(isPermanent(err));
      assert.match(err.message, /param base: want an absolute directory/);
      assert.equal(err.details.plugin, "files");
      return true;
    });
    await assert.rejects(deployer.validate(request({ params: {} })), (err: unknown) => ManentError.from(err).code === Code.Aborted);
  });

  it("keeps the per-target results of a failed deploy, and reports the targets that ran", async () => {
    const targets = ["a", "b", "c"].map((host) => ({ host, labels: {} }));
    const progress: string[] = [];
    const req = request({ targets, params: { base, fail_host: "b" }, progress: (r) => progress.push(`${r.host}:${r.status}`) });
    await assert.rejects(deployer.deploy(req), (err: unknown) => {
      assert.ok(err instanceof ResultError, `want ResultError, got ${String(err)}`);
      assert.equal(isPermanent(err), false);
      assert.deepEqual(
        err.result.targets.map((r) => r.status),
        ["deployed", "failed", "skipped"],
      );
      assert.match(err.result.targets[1]!.error ?? "", /failing as param fail_host asks/);
      return true;
    });
    assert.deepEqual(progress, ["a:deployed", "b:failed"]);
  });

  it("answers Supports, and a call outside the capabilities is absent", async () => {
    assert.equal(await deployer.supports({ type: "file", name: "x", version: "1", source: "x" }), true);
    assert.equal(await deployer.supports({ type: "container", name: "x", version: "1", source: "x" }), false);
    assert.equal(typeof (deployer as unknown as Record<string, unknown>).prepareSlots, "function", "the sample declares slots");
    // The host's deployer has exactly the methods of the declared capabilities.
    const neverCalled: CallRunner = () => Promise.reject(new Error("no call expected"));
    const bare = remoteDeployer("bare", ["dry_run"], neverCalled) as unknown as Record<string, unknown>;
    for (const method of ["prepareSlots", "deployCandidate", "setCandidateWeight", "routeTesters", "scaleCandidate", "rollback"]) {
      assert.equal(bare[method], undefined, method);
    }
    assert.equal(typeof bare.dryRun, "function");
  });

  it("cancels a running deploy when the request's signal aborts", async () => {
    const ac = new AbortController();
    const running = deployer.deploy(request({ deploymentId: "cancel-me", params: { base, delay_ms: "60000" }, signal: ac.signal }));
    await logger.waitFor((e) => e.msg === "deploy started" && pluginFields(e).deployment === "cancel-me");
    ac.abort();
    await assert.rejects(running, (err: unknown) => ManentError.from(err).code === Code.Canceled);
  });

  it("serves 20 concurrent deploys from one process", async () => {
    const pid = plugin.endpoint()!.pid;
    const all = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        deployer.deploy(request({ deploymentId: `c-${i}`, targets: [{ host: `h${i}`, labels: {} }], params: { base } })),
      ),
    );
    assert.equal(all.length, 20);
    assert.ok(all.every((r) => r.targets[0]!.status === "deployed"));
    assert.equal(plugin.endpoint()!.pid, pid);
    assert.equal(plugin.restartCount(), 0);
  });

  it("close() stops the process after its running calls", async () => {
    const pid = plugin.endpoint()!.pid;
    const running = deployer.deploy(request({ deploymentId: "last", params: { base, delay_ms: "300" } }));
    await logger.waitFor((e) => e.msg === "deploy started" && pluginFields(e).deployment === "last");
    const closing = plugin.close();
    const res = await running;
    assert.equal(res.targets[0]!.status, "deployed");
    await closing;
    assert.ok(await waitGone(pid, 5_000), "plugin process still alive after close");
    assert.equal(alive(pid), false);
    await assert.rejects(plugin.capabilities(), /plugin files is closed/);
  });
});
