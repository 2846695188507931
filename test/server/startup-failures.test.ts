import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { after, before, describe, it } from "node:test";
import { serverBin } from "../support/server-process.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

/** A start-up that cannot finish ends the process with a non-zero code and leaves nothing running. */
describe("start-up failures", () => {
  let ws: Workspace;
  let squatter: Server;
  let port: number;

  before(async () => {
    ws = await createWorkspace();
    squatter = createServer();
    await new Promise<void>((r) => squatter.listen(0, "127.0.0.1", r));
    port = (squatter.address() as { port: number }).port;
  });
  after(() => squatter?.close());

  it("exits non-zero when its port is taken, before starting the embedded Postgres", async () => {
    // No database_url: the embedded default, which must not be started (or must be stopped again).
    const config = await ws.write("manent.yml", manentYml(undefined, { listen: `127.0.0.1:${port}` }));
    const child = spawn(process.execPath, [serverBin, "-c", config, "serve"], { cwd: ws.dir, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 1, stderr);
    assert.match(stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
    assert.equal(existsSync(ws.path("work", "postgres", "data", "postmaster.pid")), false, "an embedded Postgres was left running");
  });
});
