import assert from "node:assert/strict";
import { rename, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { describe, it } from "node:test";
import { findEnvconfig, loadManentConfig } from "../../src/core/config/index.js";
import { EnvconfigCache, settled } from "../../src/core/config/envconfig-cache.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { createWorkspace, manentYml } from "../support/workspace.js";

/** The server's envconfig cache: a file is parsed again whenever its text changes, never served stale; what it gives is frozen. */
describe("envconfig cache", () => {
  const key = { tenant: "untenanted", application: "app", artifact: "app", environment: "prod" };

  it("gives the envconfig of the file's current text, parses an unchanged text once, and refuses a broken one each time", async () => {
    const ws = await createWorkspace();
    const config = await loadManentConfig(await ws.write("manent.yml", manentYml(undefined)), ws.dir);
    const file = await ws.write("envconfig/untenanted/app/app/prod.yml", { plugin: "noop", targets: [{ host: "a" }] });

    const first = await findEnvconfig(config, key);
    const again = await findEnvconfig(config, key);
    assert.deepEqual(first.envconfig.targets, [{ host: "a", labels: {} }]);
    assert.equal(again.envconfig, first.envconfig, "an unchanged text is not parsed again");
    assert.ok(Object.isFrozen(first.envconfig.targets[0]!.labels), "a shared envconfig cannot be changed by one deploy");

    // Same size, one byte changed: a new parse.
    await writeFile(file, "plugin: noop\ntargets: [{host: b}]\n");
    assert.deepEqual((await findEnvconfig(config, key)).envconfig.targets, [{ host: "b", labels: {} }]);

    await writeFile(file, "plugin: noop\ntargets: [{host: b, colour: red}]\n");
    for (let i = 0; i < 2; i++) {
      await assert.rejects(findEnvconfig(config, key), (err: unknown) => {
        assert.ok(err instanceof ManentError && err.code === Code.InvalidArgument);
        assert.match(err.message, /prod\.yml: targets\.0: unknown field "colour"/);
        return true;
      });
    }
    // Back to an earlier text: parsed and served again.
    await writeFile(file, "plugin: noop\ntargets: [{host: a}]\n");
    assert.deepEqual((await findEnvconfig(config, key)).envconfig.targets, [{ host: "a", labels: {} }]);
  });

  it("keeps a file's text while its status is unchanged, and reads it again once the file is rewritten, replaced or relinked", async () => {
    const ws = await createWorkspace();
    const loaded = await loadManentConfig(await ws.write("manent.yml", manentYml(undefined)), ws.dir);
    // A clock an hour ahead: every file's status is settled, so only the status tells a change.
    const config = { ...loaded, envconfigCache: new EnvconfigCache(() => (BigInt(Date.now()) + 3_600_000n) * 1_000_000n) };
    const rel = "envconfig/untenanted/app/app/prod.yml";
    const file = ws.path(rel);
    const hosts = async () => (await findEnvconfig(config, key)).envconfig.targets.map((t) => t.host);
    // Same size each time, and file times set apart: what changes is never the size alone.
    const write = async (path: string, host: string, mtime: number) =>
      utimes(await ws.write(path, `plugin: noop\ntargets: [{host: ${host}}]\n`), mtime, mtime);

    await write(rel, "a", 1000);
    const first = await findEnvconfig(config, key);
    const again = await findEnvconfig(config, key);
    assert.deepEqual(
      first.envconfig.targets.map((t) => t.host),
      ["a"],
    );
    assert.equal(again.envconfig, first.envconfig);
    assert.equal(again.text, first.text);
    assert.deepEqual(again.origin, first.origin);

    await write(rel, "b", 2000); // rewritten in place
    assert.deepEqual(await hosts(), ["b"]);

    await write("new.yml", "c", 2000); // replaced: a new file renamed over it, same times
    await rename(ws.path("new.yml"), file);
    assert.deepEqual(await hosts(), ["c"]);

    await write("d.yml", "d", 3000);
    await write("e.yml", "e", 3000);
    await rm(file);
    await symlink(ws.path("d.yml"), file);
    assert.deepEqual(await hosts(), ["d"]);
    await rm(file);
    await symlink(ws.path("e.yml"), file); // the link swapped for one to another file
    assert.deepEqual(await hosts(), ["e"]);

    await rm(file);
    await assert.rejects(findEnvconfig(config, key), /prod\.yml: file not found|no envconfig/);
  });

  it("reads a file again when its last change was too recent for its status to tell the next one", async () => {
    const ws = await createWorkspace();
    const config = await loadManentConfig(await ws.write("manent.yml", manentYml(undefined)), ws.dir);
    const file = ws.path("envconfig/untenanted/app/app/prod.yml");
    // Same size, same inode, same modification time: only the change time (from a clock that ticks
    // every few milliseconds, so possibly the same) could tell these two texts apart.
    await ws.write("envconfig/untenanted/app/app/prod.yml", "plugin: noop\ntargets: [{host: a}]\n");
    await utimes(file, 1000, 1000);
    assert.deepEqual((await findEnvconfig(config, key)).envconfig.targets, [{ host: "a", labels: {} }]);
    await writeFile(file, "plugin: noop\ntargets: [{host: b}]\n");
    await utimes(file, 1000, 1000);
    assert.deepEqual((await findEnvconfig(config, key)).envconfig.targets, [{ host: "b", labels: {} }]);
  });

  it("trusts a status only when the file's last change lies two seconds or more before it was looked at", () => {
    const s = 1_000_000_000n;
    const at = 1_000n * s;
    assert.equal(settled({ ctimeNs: at - 2n * s, mtimeNs: at - 5n * s }, at), true);
    assert.equal(settled({ ctimeNs: at - 2n * s + 1n, mtimeNs: at - 5n * s }, at), false, "changed 2 s - 1 ns before");
    assert.equal(settled({ ctimeNs: at - 5n * s, mtimeNs: at - 1n }, at), false, "a modification time just before");
    assert.equal(settled({ ctimeNs: at + s, mtimeNs: at + s }, at), false, "a time ahead of the clock");
  });
});
