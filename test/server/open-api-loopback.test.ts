import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { TestPostgres } from "../support/postgres.js";
import { serverBin, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

/** A GET from a client socket bound to `localAddress` (Linux routes all of 127/8 to lo). */
async function getFrom(url: string, localAddress: string): Promise<number> {
  const req = request(url, { localAddress });
  req.end();
  const [res] = (await once(req, "response")) as [import("node:http").IncomingMessage];
  res.resume();
  await once(res, "end");
  return res.statusCode!;
}

/** An open API (no tokens) is allowed on every loopback address, the same ones TLS counts, and nowhere else. */
describe("open API on loopback", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess | undefined;

  before(async () => {
    [pg, ws] = await Promise.all([TestPostgres.start(), createWorkspace()]);
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("answers a client on 127.0.0.2 when listening on 127.0.0.2", async () => {
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { listen: "127.0.0.2:0" }));
    server = await startServer(config, { cwd: ws.dir, freePort: false });
    assert.match(server.url, /^http:\/\/127\.0\.0\.2:\d+$/);
    assert.equal(await getFrom(`${server.url}/api/v1/deploys`, "127.0.0.2"), 200);
  });

  it("still refuses to open the API on a non-loopback address", async () => {
    const file = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { listen: "0.0.0.0:0", tls: { behind_proxy: true } }));
    const child = spawn(process.execPath, [serverBin, "-c", file, "serve"], { cwd: ws.dir, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 2, stderr);
    assert.match(
      stderr,
      /auth\.tokens: no API token is configured, so the API may only listen on a loopback address \(listen is 0\.0\.0\.0:0\)/,
    );
  });
});
