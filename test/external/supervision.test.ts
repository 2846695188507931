import assert from "node:assert/strict";
import { chmod, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Registry } from "prom-client";
import { Code, isPermanent, ManentError } from "../../src/plugin.js";
import { ExternalPlugin, type SupervisionOptions } from "../../src/external/host/index.js";
import { buildGoBinaries } from "../interop/go-tools.js";
import { buildFixture, buildSamplePlugin, recordingLogger, request, tempDir, waitGone } from "./helpers.js";

// Short restart delays; health pings stay at their default cadence except in the test about
// them, so a slow CI machine cannot turn a late ping into an unexpected restart.
const fast: Partial<SupervisionOptions> = { backoffBaseMs: 20, backoffMaxMs: 200 };
const pings: Partial<SupervisionOptions> = { pingIntervalMs: 150, pingTimeoutMs: 500, pingFailureBudget: 2 };

describe("supervision of the plugin process", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let sample: string;
  let probe: string;
  before(async () => {
    t = await tempDir();
    [sample, probe] = await Promise.all([buildSamplePlugin(t.dir), buildFixture("probe-plugin", t.dir)]);
  });
  after(() => t.cleanup());

  it("fails a call cut by a crash as retryable and serves the retry from a restarted process", async () => {
    const logger = recordingLogger();
    const registry = new Registry();
    const p = await ExternalPlugin.activate({
      name: "s",
      entry: { external: { command: sample } },
      baseDir: t.dir,
      logger,
      registry,
      supervision: fast,
    });
    try {
      assert.deepEqual(p.supervision(), { status: "not_started", restarts: 0, last_start: null, capabilities: null, last_error: null });
      const d = await p.deployer();
      const firstStart = p.supervision().last_start;
      assert.equal(p.supervision().status, "up");
      const base = path.join(t.dir, "crash");
      const first = p.endpoint()!.pid;
      const running = d.deploy(request({ deploymentId: "victim", params: { base, delay_ms: "30000" } }));
      await logger.waitFor(
        (e) => e.msg === "deploy started" && (e.attrs.plugin_fields as Record<string, unknown> | undefined)?.deployment === "victim",
      );
      process.kill(first, "SIGKILL");
      await assert.rejects(running, (err: unknown) => {
        const e = ManentError.from(err);
        assert.equal(e.code, Code.Unavailable);
        assert.equal(isPermanent(e), false);
        assert.match(e.message, /plugin s: process exited unexpectedly \(signal SIGKILL\) during Deploy/);
        return true;
      });
      const res = await d.deploy(request({ deploymentId: "retry", params: { base } }));
      assert.equal(res.targets[0]!.status, "deployed");
      assert.notEqual(p.endpoint()!.pid, first);
      assert.equal(p.restartCount(), 1);
      assert.match(await registry.metrics(), /manent_plugin_restarts_total\{plugin="s"\} 1/);
      const now = p.supervision();
      assert.equal(now.status, "up");
      assert.equal(now.restarts, 1);
      assert.ok(now.last_start && firstStart && now.last_start > firstStart, "the restart is the last start");
    } finally {
      await p.close();
    }
    assert.equal(p.supervision().status, "stopped");
  });

  it("detects a hung plugin (SIGSTOP) with health pings and replaces it", async () => {
    const logger = recordingLogger();
    const p = await ExternalPlugin.activate({
      name: "h",
      entry: { external: { command: sample } },
      baseDir: t.dir,
      logger,
      supervision: { ...fast, ...pings },
    });
    try {
      await p.capabilities();
      const hung = p.endpoint()!.pid;
      process.kill(hung, "SIGSTOP");
      await logger.waitFor((e) => e.msg === "external plugin does not answer health checks, killing it" && e.attrs.pid === hung);
      assert.ok(await waitGone(hung, 5_000), "the hung process was not killed");
      await logger.waitFor((e) => e.msg === "external plugin started" && e.attrs.pid !== hung);
      const d = await p.deployer();
      assert.equal((await d.deploy(request({ params: { base: path.join(t.dir, "hung") } }))).targets[0]!.status, "deployed");
      assert.notEqual(p.endpoint()!.pid, hung);
    } finally {
      await p.close();
    }
  });

  it("fails a call in flight on a hung (SIGSTOPped) plugin as retryable once the process is declared dead, not at its own deadline", async () => {
    const logger = recordingLogger();
    const p = await ExternalPlugin.activate({
      name: "stop",
      entry: { external: { command: sample } },
      baseDir: t.dir,
      logger,
      supervision: { ...fast, ...pings },
    });
    try {
      const d = await p.deployer();
      const hung = p.endpoint()!.pid;
      // The plugin would answer after 60 s; only the supervisor's verdict can end the call before.
      const running = d.deploy(request({ deploymentId: "frozen", params: { base: path.join(t.dir, "frozen"), delay_ms: "60000" } }));
      await logger.waitFor(
        (e) => e.msg === "deploy started" && (e.attrs.plugin_fields as Record<string, unknown> | undefined)?.deployment === "frozen",
      );
      const stoppedAt = Date.now();
      process.kill(hung, "SIGSTOP");
      await assert.rejects(running, (err: unknown) => {
        const e = ManentError.from(err);
        assert.equal(e.code, Code.Unavailable);
        assert.equal(isPermanent(e), false);
        assert.match(
          e.message,
          /plugin stop: process was killed after 2 failed health checks \(.+\) during Deploy; it is being restarted, retry the call/,
        );
        return true;
      });
      const declaredDead = logger.entries.find((e) => e.msg === "external plugin does not answer health checks, killing it");
      assert.equal(declaredDead?.attrs.pid, hung);
      // For people reading the output (not asserted: the machine may be loaded): 2 checks of 500 ms, 150 ms apart.
      console.log(`# SIGSTOP to failed call: ${Date.now() - stoppedAt} ms`);
      assert.ok(await waitGone(hung, 5_000), "the hung process was not killed");
      const res = await d.deploy(request({ deploymentId: "after", params: { base: path.join(t.dir, "frozen") } }));
      assert.equal(res.targets[0]!.status, "deployed");
      assert.notEqual(p.endpoint()!.pid, hung);
    } finally {
      await p.close();
    }
  });

  it("restarts a plugin that gave up when an operator asks, with a fresh restart budget, without a new host", async () => {
    const logger = recordingLogger();
    const broken = path.join(t.dir, "broken");
    const wrapper = path.join(t.dir, "sometimes-broken");
    await writeFile(broken, "");
    await writeFile(wrapper, `#!/bin/sh\nif [ -e '${broken}' ]; then echo "disk full" >&2; exit 3; fi\nexec '${sample}'\n`);
    await chmod(wrapper, 0o755);
    const p = await ExternalPlugin.activate({
      name: "gu",
      entry: { external: { command: wrapper } },
      baseDir: t.dir,
      logger,
      supervision: { ...fast, maxRestarts: 1, cooldownMs: 0 },
    });
    try {
      while (p.supervision().status !== "gave_up") await p.capabilities().catch(() => {});
      await assert.rejects(p.capabilities(), /plugin gu: gave up after 2 consecutive failures, not restarting it; last error: .*disk full/);
      await rm(broken);
      const after = await p.restart();
      assert.equal(after.status, "up");
      const d = await p.deployer();
      assert.equal((await d.deploy(request({ params: { base: path.join(t.dir, "gu") } }))).targets[0]!.status, "deployed");

      // A restart of a running process replaces it; a call it was running fails as retryable.
      const first = p.endpoint()!.pid;
      const running = d.deploy(request({ deploymentId: "replaced", params: { base: path.join(t.dir, "gu"), delay_ms: "60000" } }));
      await logger.waitFor(
        (e) => e.msg === "deploy started" && (e.attrs.plugin_fields as Record<string, unknown> | undefined)?.deployment === "replaced",
      );
      const outcome = running.then(
        () => assert.fail("the replaced process's call succeeded"),
        (err: unknown) => err,
      );
      assert.equal((await p.restart()).status, "up");
      await assert.rejects(Promise.reject(await outcome), (err: unknown) => {
        const e = ManentError.from(err);
        assert.equal(e.code, Code.Unavailable);
        assert.match(e.message, /plugin gu: process was restarted by an operator during Deploy/);
        return true;
      });
      assert.ok(await waitGone(first, 5_000), "the replaced process is still running");
      assert.notEqual(p.endpoint()!.pid, first);
      assert.equal(p.supervision().restarts, 0, "an operator's restart is not a crash");
    } finally {
      await p.close();
    }
  });

  it("an operator's restart does not wait out the restart backoff", async () => {
    const logger = recordingLogger();
    const broken = path.join(t.dir, "broken-backoff");
    const wrapper = path.join(t.dir, "broken-for-a-while");
    await writeFile(broken, "");
    await writeFile(wrapper, `#!/bin/sh\nif [ -e '${broken}' ]; then exit 3; fi\nexec '${sample}'\n`);
    await chmod(wrapper, 0o755);
    // A 10-minute backoff: only the operator's restart can start it again within the test.
    const p = await ExternalPlugin.activate({
      name: "bo",
      entry: { external: { command: wrapper } },
      baseDir: t.dir,
      logger,
      supervision: { backoffBaseMs: 600_000, backoffMaxMs: 600_000 },
    });
    try {
      await assert.rejects(p.capabilities(), /plugin bo: exited before the handshake \(exit code 3\)/);
      // Nothing restarts a plugin whose start failed: the next use tries again, after the backoff.
      const failed = p.supervision();
      assert.equal(failed.status, "start_failed");
      assert.match(failed.last_error ?? "", /exited before the handshake \(exit code 3\)/);
      assert.equal(failed.capabilities, null);
      const waiting = p.capabilities(); // waits for the backoff
      await rm(broken);
      const guard = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error("the restart waited for the backoff")), 60_000).unref(),
      );
      assert.equal((await Promise.race([p.restart(), guard])).status, "up");
      assert.ok((await Promise.race([waiting, guard])).length > 0, "the call waiting for the backoff is served too");
    } finally {
      await p.close();
    }
  });

  it("fails once, permanently, a plugin that refuses the magic cookie (go-plugin and TS SDK binaries)", async () => {
    const { goSample } = await buildGoBinaries();
    for (const [sdk, binary] of [
      ["go", goSample],
      ["ts", sample],
    ] as const) {
      const logger = recordingLogger();
      // A real plugin binary that expects another cookie: what a plugin built for another host (or
      // another version of manent's handshake) sees when manent starts it.
      const wrapper = path.join(t.dir, `other-cookie-${sdk}`);
      await writeFile(wrapper, `#!/bin/sh\nMANENT_PLUGIN=another-host-cookie exec '${binary}'\n`);
      await chmod(wrapper, 0o755);
      const p = await ExternalPlugin.activate({
        name: `cookie-${sdk}`,
        entry: { external: { command: wrapper } },
        baseDir: t.dir,
        logger,
        supervision: fast,
      });
      try {
        const check = (err: unknown) => {
          const e = ManentError.from(err);
          assert.equal(e.code, Code.FailedPrecondition);
          assert.equal(isPermanent(e), true);
          assert.match(
            e.message,
            new RegExp(
              `plugin cookie-${sdk}: exited before the handshake \\(exit code 1\\): it refused manent's magic cookie MANENT_PLUGIN`,
            ),
          );
          assert.match(e.message, /not meant to be executed directly/);
          return true;
        };
        await assert.rejects(p.capabilities(), check);
        await assert.rejects(p.capabilities(), check);
        await assert.rejects(p.deployer(), check);
        assert.equal(p.supervision().status, "gave_up");
        // Started once: no restart loop, no cool-down retry.
        assert.equal(
          logger.entries.filter((e) => /not meant to be executed directly/.test(e.msg)).length,
          1,
          JSON.stringify(logger.entries),
        );
        assert.equal(logger.entries.filter((e) => e.msg === "external plugin cannot run, not restarting it").length, 1);
      } finally {
        await p.close();
      }
    }
  });

  it("shows the capabilities of a process started only to read them, and says so when a cut call was the failure it gave up on", async () => {
    const logger = recordingLogger();
    const p = await ExternalPlugin.activate({
      name: "one-chance",
      entry: { external: { command: sample } },
      baseDir: t.dir,
      logger,
      supervision: { ...fast, maxRestarts: 0, cooldownMs: 0 },
    });
    try {
      const capabilities = await p.capabilities();
      const up = p.supervision();
      assert.equal(up.status, "up");
      assert.deepEqual(up.capabilities, capabilities);
      assert.ok(capabilities.length > 0);

      const d = await p.deployer();
      const running = d.deploy(request({ deploymentId: "last", params: { base: path.join(t.dir, "oc"), delay_ms: "30000" } }));
      await logger.waitFor(
        (e) => e.msg === "deploy started" && (e.attrs.plugin_fields as Record<string, unknown> | undefined)?.deployment === "last",
      );
      process.kill(p.endpoint()!.pid, "SIGKILL");
      await assert.rejects(running, (err: unknown) => {
        const e = ManentError.from(err);
        // No restart is coming: the message must not tell the caller to retry.
        assert.doesNotMatch(e.message, /being restarted|retry the call/);
        assert.match(e.message, /plugin one-chance: process exited unexpectedly \(signal SIGKILL\) during Deploy; the supervisor gave up/);
        assert.equal(e.code, Code.FailedPrecondition);
        return true;
      });
      const gaveUp = p.supervision();
      assert.equal(gaveUp.status, "gave_up");
      assert.match(gaveUp.last_error ?? "", /exited unexpectedly/);
    } finally {
      await p.close();
    }
  });

  it("gives up on a crash loop with a clear error instead of restarting forever", async () => {
    const logger = recordingLogger();
    const registry = new Registry();
    const p = await ExternalPlugin.activate({
      name: "loop",
      entry: { external: { command: probe }, exit_after_ms: 30 },
      baseDir: t.dir,
      logger,
      registry,
      supervision: { ...fast, maxRestarts: 3 },
    });
    try {
      // Until one start succeeds (a loaded machine may see the process die before its handshake, which
      // fails the call itself); from then on the supervisor restarts in the background until it gives up.
      for (;;) {
        const err = await p.capabilities().then(
          () => undefined,
          (e: unknown) => ManentError.from(e),
        );
        if (!err || err.code === Code.FailedPrecondition) break;
      }
      await logger.waitFor((e) => e.msg === "external plugin keeps failing, giving up");
      const started = Date.now();
      await assert.rejects(p.capabilities(), (err: unknown) => {
        const e = ManentError.from(err);
        assert.equal(e.code, Code.FailedPrecondition);
        // The last failure is a crash after the handshake or during it, depending on the machine's load.
        assert.match(e.message, /plugin loop: gave up after 4 consecutive failures, not restarting it; last error: .+/);
        return true;
      });
      assert.ok(Date.now() - started < 100, "a call after giving up must fail fast");
      assert.ok(logger.entries.filter((e) => e.msg === "external plugin started").length <= 4);
      assert.match(await registry.metrics(), /manent_plugin_gave_up\{plugin="loop"\} 1/);
      assert.equal(p.supervision().status, "gave_up");
    } finally {
      await p.close();
    }
  });

  it("leaves no process behind when stopped during its start", async () => {
    const logger = recordingLogger();
    const slow = path.join(t.dir, "slow-start");
    await writeFile(slow, '#!/bin/sh\necho "pid $$" >&2\nexec sleep 30\n');
    await chmod(slow, 0o755);
    const p = await ExternalPlugin.activate({
      name: "slow",
      entry: { external: { command: slow, start_timeout: "30s" } },
      baseDir: t.dir,
      logger,
    });
    const starting = p.capabilities();
    const pid = Number((await logger.waitFor((e) => e.msg.startsWith("pid "))).msg.slice(4));
    await p.close();
    await assert.rejects(starting, (err: unknown) => /plugin slow/.test(ManentError.from(err).message));
    assert.ok(await waitGone(pid, 5_000), "the starting plugin outlived close()");
  });
});
