import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { chmod, copyFile, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../src/plugin.js";
import { ExternalPlugin } from "../../src/external/host/index.js";
import { buildSamplePlugin, recordingLogger, request, tempDir, waitGone } from "./helpers.js";

/** A shell "plugin" that prints `stdout` (if any) and then sleeps, reporting its pid on stderr. */
async function script(dir: string, name: string, stdout: string | undefined): Promise<string> {
  const file = path.join(dir, name);
  const body = ["#!/bin/sh", 'echo "pid $$" >&2', stdout === undefined ? "" : `printf '%s\\n' '${stdout}'`, "exec sleep 30"].join("\n");
  await writeFile(file, body + "\n");
  await chmod(file, 0o755);
  return file;
}

const sha = async (file: string) =>
  createHash("sha256")
    .update(await readFile(file))
    .digest("hex");

describe("activation checks and failed starts", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let sample: string;
  before(async () => {
    t = await tempDir();
    sample = await buildSamplePlugin(t.dir);
  });
  after(() => t.cleanup());

  const activate = (name: string, external: Record<string, unknown>, logger = recordingLogger(), extra: Record<string, unknown> = {}) =>
    ExternalPlugin.activate({ name, entry: { external, ...extra }, baseDir: t.dir, logger, builtinNames: ["remote-copy", "kubernetes"] });

  it("refuses a wrong sha256 at activation", async () => {
    await assert.rejects(activate("p", { command: sample, sha256: "0".repeat(64) }), (err: unknown) => {
      assert.ok(err instanceof ManentError);
      assert.equal(err.code, Code.FailedPrecondition);
      assert.match(err.message, /plugin p: sha256 of .*manent-ts-sample-plugin is [0-9a-f]{64}, the configuration wants 0{64}/);
      return true;
    });
  });

  it("refuses a missing or non-executable command, and a built-in name", async () => {
    await assert.rejects(activate("p", { command: "./missing" }), /plugin p: command .*missing not found/);
    const notExec = path.join(t.dir, "not-exec");
    await writeFile(notExec, "#!/bin/sh\n");
    await assert.rejects(activate("p", { command: notExec }), /is not executable/);
    await assert.rejects(
      activate("remote-copy", { command: sample }),
      /remote-copy is a built-in plugin; give the external plugin another name \(e\.g\. remote-copy-ext\)/,
    );
  });

  it("does not run the binary at activation", async () => {
    const marker = path.join(t.dir, "ran");
    const file = path.join(t.dir, "marker-plugin");
    await writeFile(file, `#!/bin/sh\ntouch ${marker}\n`);
    await chmod(file, 0o755);
    const p = await activate("m", { command: file });
    await assert.rejects(readFile(marker), { code: "ENOENT" });
    await p.close();
  });

  it("refuses a binary replaced after activation at the next start", async () => {
    const bin = path.join(t.dir, "replaced-plugin");
    await copyFile(sample, bin);
    const p = await activate("r", { command: bin, sha256: await sha(bin) });
    await writeFile(bin, "#!/bin/sh\necho '1|1|unix|/tmp/evil|grpc|'\nsleep 30\n");
    await assert.rejects(p.capabilities(), (err: unknown) => {
      assert.equal(ManentError.from(err).code, Code.FailedPrecondition);
      assert.match(ManentError.from(err).message, /plugin r: sha256 of .*replaced-plugin is .*, the configuration wants/);
      return true;
    });
    await p.close();
  });

  it("starts a binary that matches its sha256, relative to the base directory", async () => {
    const p = await activate("ok", { command: path.basename(sample), sha256: await sha(sample) });
    assert.ok((await p.capabilities()).includes("rollback"));
    await p.close();
  });

  it("accepts the entry as the manent.yml schema parsed it", async () => {
    const p = await ExternalPlugin.activate({
      name: "parsed",
      spec: { external: { command: sample, args: [], env: {}, start_timeout: 20_000 }, config: { name: "from-spec" } },
      baseDir: t.dir,
      logger: recordingLogger(),
    });
    const d = await p.deployer();
    assert.equal((await d.deploy(request({ targets: [], params: { base: t.dir } }))).plugin, "from-spec");
    await p.close();
  });

  const failures: [string, string | undefined, RegExp, Code][] = [
    [
      "a protocol version mismatch",
      "1|2|unix|/tmp/none.sock|grpc|",
      /plugin v: incompatible protocol version: plugin speaks 2, manent speaks 1/,
      Code.FailedPrecondition,
    ],
    [
      "junk on stdout",
      "Hello, I am not a plugin",
      /plugin v: unrecognized handshake on stdout: "Hello, I am not a plugin"/,
      Code.FailedPrecondition,
    ],
    ["a wrong network", "1|1|udp|127.0.0.1:9|grpc|", /plugin v: handshake: unknown network "udp"/, Code.FailedPrecondition],
    ["a net/rpc plugin", "1|1|unix|/tmp/none.sock|netrpc|", /plugin v: unsupported plugin protocol "netrpc"/, Code.FailedPrecondition],
    [
      "no AutoMTLS certificate",
      "1|1|unix|/tmp/none.sock|grpc|",
      /plugin v: handshake carries no server certificate/,
      Code.FailedPrecondition,
    ],
    ["silence", undefined, /plugin v: did not start within 400 ms/, Code.DeadlineExceeded],
  ];
  for (const [what, line, re, code] of failures) {
    it(`fails the start on ${what}, kills the process and names the plugin`, async () => {
      const logger = recordingLogger();
      const file = await script(t.dir, `bad-${what.replace(/\W+/g, "-")}`, line);
      // Only the silent plugin needs a short timeout; the others fail on their first line.
      const p = await activate("v", { command: file, start_timeout: line === undefined ? "400ms" : "20s" }, logger);
      const started = Date.now();
      await assert.rejects(p.capabilities(), (err: unknown) => {
        const e = ManentError.from(err);
        assert.match(e.message, re);
        assert.equal(e.code, code);
        return true;
      });
      assert.ok(Date.now() - started < 15_000);
      const pidLine = await logger.waitFor((e) => e.msg.startsWith("pid "));
      assert.ok(await waitGone(Number(pidLine.msg.slice(4)), 5_000), "the failed plugin process is still running");
      await p.close();
    });
  }

  it("reports the factory's configuration error at the first start", async () => {
    const p = await activate("cfg", { command: sample }, recordingLogger(), { name: "" });
    await assert.rejects(p.capabilities(), (err: unknown) => {
      const e = ManentError.from(err);
      assert.equal(e.code, Code.InvalidArgument);
      assert.match(e.message, /config field name/);
      assert.equal(e.details.plugin, "cfg");
      return true;
    });
    await p.close();
  });
});
