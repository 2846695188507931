import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { describe, it } from "node:test";
import { findEnvconfig, loadManentConfig } from "../../src/core/config/index.js";
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
});
