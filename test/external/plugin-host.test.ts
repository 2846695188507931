import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { copyFile, mkdir, readdir, readFile, stat, utimes, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../src/plugin.js";
import { ExternalPlugin, PluginHost } from "../../src/external/host/index.js";
import { buildSamplePlugin, recordingLogger, tempDir } from "./helpers.js";

const sha = async (file: string) =>
  createHash("sha256")
    .update(await readFile(file))
    .digest("hex");

/**
 * The part of the host a server's external plugins share: private copies of the binaries under
 * the workdir, verified once and reused while the source is unchanged, and what a server that
 * died left there removed at the next start.
 */
describe("plugin host: private copies under the workdir", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let sample: string;
  const logger = recordingLogger();

  before(async () => {
    t = await tempDir();
    sample = await buildSamplePlugin(t.dir);
  });
  after(() => t.cleanup());

  /** The private copy the plugin process runs (setpriv execs it in the same pid; node runs the bundle). */
  const running = async (p: ExternalPlugin, host: PluginHost) => {
    const argv = (await readFile(`/proc/${p.pid()!}/cmdline`, "utf8")).split("\0");
    const copy = argv.find((a) => a.startsWith(host.runDir + path.sep));
    assert.ok(copy, `the plugin runs ${argv.join(" ")}, not a copy in ${host.runDir}`);
    return copy;
  };

  it("runs a private copy below <workdir>/plugins, reused across restarts while the source is unchanged", async () => {
    const workdir = path.join(t.dir, "work-reuse");
    const bin = path.join(t.dir, "reused-plugin");
    await copyFile(sample, bin);
    const host = await PluginHost.create({ workdir });
    host.acquire(); // the test's own reference: the host outlives each plugin
    try {
      const first = await ExternalPlugin.activate({
        name: "a",
        entry: { external: { command: bin, sha256: await sha(bin) } },
        baseDir: t.dir,
        logger,
        host,
      });
      await first.capabilities();
      const copy = await running(first, host);
      assert.equal(path.dirname(copy), host.runDir);
      assert.ok(host.runDir.startsWith(path.join(workdir, "plugins", "run-")));
      assert.equal((await stat(copy)).mode & 0o777, 0o500);
      assert.equal((await stat(host.runDir)).mode & 0o777, 0o700);
      await first.close();

      const second = await ExternalPlugin.activate({
        name: "a",
        entry: { external: { command: bin, sha256: await sha(bin) } },
        baseDir: t.dir,
        logger,
        host,
      });
      await second.capabilities();
      assert.equal(await running(second, host), copy, "an unchanged source is not copied again");
      await second.close();

      // The source changes (same bytes here, but a new mtime/ctime): a fresh copy, checked again.
      const later = new Date(Date.now() + 5_000);
      await utimes(bin, later, later);
      const third = await ExternalPlugin.activate({
        name: "a",
        entry: { external: { command: bin, sha256: await sha(bin) } },
        baseDir: t.dir,
        logger,
        host,
      });
      await third.capabilities();
      const fresh = await running(third, host);
      assert.notEqual(fresh, copy);
      assert.ok(!existsSync(copy), "the replaced copy is removed");
      await third.close();
    } finally {
      await host.release();
    }
    assert.ok(!existsSync(host.runDir) && !existsSync(host.socketDir), "the last release removes the run");
  });

  it("checks a source replaced after the copy was made: the new bytes are refused, nothing else runs", async () => {
    const workdir = path.join(t.dir, "work-replace");
    const bin = path.join(t.dir, "replaced-plugin");
    await copyFile(sample, bin);
    const host = await PluginHost.create({ workdir });
    host.acquire();
    try {
      const p = await ExternalPlugin.activate({
        name: "r",
        entry: { external: { command: bin, sha256: await sha(bin) } },
        baseDir: t.dir,
        logger,
        host,
      });
      await p.capabilities();
      await p.close();
      await writeFile(bin, "#!/bin/sh\necho pwned\n");
      await assert.rejects(host.stage("r", bin, await sha(sample)), (err: unknown) => {
        assert.equal(ManentError.from(err).code, Code.FailedPrecondition);
        assert.match(ManentError.from(err).message, /plugin r: sha256 of .*replaced-plugin is [0-9a-f]{64}, the configuration wants/);
        return true;
      });
      assert.deepEqual(
        (await readdir(host.runDir)).filter((f) => f !== "owner" && f !== "sockets"),
        [],
        "no unchecked copy is kept",
      );
    } finally {
      await host.release();
    }
  });

  it("removes at start what a server that died left, and leaves a live server's run alone", async () => {
    const workdir = path.join(t.dir, "work-stale");
    const root = path.join(workdir, "plugins");
    await mkdir(root, { recursive: true });
    // A run of a dead process: the pid of a process that has exited, with its socket directory.
    const deadSockets = path.join(os.tmpdir(), `manent-plugin-999999-${"ab".repeat(6)}`);
    await mkdir(deadSockets, { recursive: true });
    const dead = path.join(root, "run-999999-0123456789ab");
    await mkdir(dead);
    await writeFile(path.join(dead, "owner"), "999999 12345");
    await writeFile(path.join(dead, "sockets"), deadSockets);
    await writeFile(path.join(dead, "plugin-0123"), "old copy");
    // This process with another start time: a previous server that had the same pid (pid 1 in a container).
    const samePid = path.join(root, `run-${process.pid}-aaaaaaaaaaaa`);
    await mkdir(samePid);
    await writeFile(path.join(samePid, "owner"), `${process.pid} 1`);
    // A live host of this process sharing the workdir.
    const live = await PluginHost.create({ workdir, logger });
    live.acquire();
    const next = await PluginHost.create({ workdir, logger });
    next.acquire();
    try {
      assert.ok(!existsSync(dead) && !existsSync(deadSockets) && !existsSync(samePid));
      assert.ok(existsSync(live.runDir) && existsSync(next.runDir));
      assert.ok(logger.entries.some((e) => /removed plugin copies left by a server/.test(e.msg)));
    } finally {
      await Promise.all([live.release(), next.release()]);
    }
    assert.deepEqual(await readdir(root), []);
  });
});
