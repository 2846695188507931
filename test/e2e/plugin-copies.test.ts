import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildGoBinaries } from "../interop/go-tools.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Private copies of external plugin binaries live under the server's workdir, not in $TMPDIR, and
 * what a server killed with SIGKILL left there (its copies and its socket directory) is removed
 * when the next server starts on that workdir.
 */
describe("private copies of plugin binaries across a server crash", () => {
  let db: TestPostgres;
  let ws: Workspace;
  let config: string;
  let server: ServerProcess | undefined;
  const plugins = () => ws.path("work", "plugins");
  const runs = async () => (await readdir(plugins())).filter((n) => n.startsWith("run-")).sort();
  const deploy = (version: string) =>
    runCli(["deploy", "-f", "d.yml", "--version", version, "-o", "json"], { cwd: ws.dir, server: server!.url });

  before(async () => {
    const { goSample } = await buildGoBinaries();
    db = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("keys/deploy-key", "k");
    await ws.write("d.yml", descriptor("shop", "prod", await ws.write("dist/shop.txt", "shop\n")));
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "sample",
      targets: [{ host: "h1" }],
      params: { base: ws.path("targets") },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
    });
    const sha256 = createHash("sha256")
      .update(await readFile(goSample))
      .digest("hex");
    config = await ws.write(
      "manent.yml",
      manentYml(await db.createDatabase(), { plugins: { sample: { external: { command: goSample, sha256 } } } }),
    );
  });
  after(async () => {
    await server?.stop();
    await db?.stop();
  });

  it("runs the copy from <workdir>/plugins and removes a killed server's leftovers at the next start", async () => {
    server = await startServer(config, { cwd: ws.dir });
    let r = await deploy("1.0.0");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const [killedRun] = await runs();
    assert.ok(killedRun?.startsWith(`run-${server.child.pid}-`), `runs: ${(await runs()).join(",")}`);
    const killedDir = path.join(plugins(), killedRun!);
    const copies = (await readdir(killedDir)).filter((f) => f.startsWith("manent-plugin-go-sample-"));
    assert.equal(copies.length, 1, "one private copy of the plugin");
    const socketDir = await readFile(path.join(killedDir, "sockets"), "utf8");
    assert.ok(existsSync(socketDir));

    await server.kill();
    assert.ok(existsSync(path.join(killedDir, copies[0]!)) && existsSync(socketDir), "SIGKILL leaves the run behind");

    server = await startServer(config, { cwd: ws.dir });
    // Removed while the server started, before any plugin runs.
    assert.ok(!existsSync(killedDir), "the killed server's copies are gone");
    assert.ok(!existsSync(socketDir), "the killed server's socket directory is gone");
    const [current] = await runs();
    assert.ok(current?.startsWith(`run-${server.child.pid}-`));
    assert.equal((await runs()).length, 1);
    assert.match(server.logs(), /removed plugin copies left by a server that stopped without cleaning up/);

    r = await deploy("2.0.0");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await server.stop();
    server = undefined;
    assert.deepEqual(await runs(), [], "a server that stops cleanly removes its run");
  });
});
