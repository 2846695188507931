import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readFile, stat, symlink } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const teamToken = "team-a-token-0123456789";

/**
 * A real manent-server with the default artifact rules (no server path, no URL allowed) but one
 * allowed directory and one allowed loopback URL, called with a tenant's token: what a tenant may
 * not read is refused before anything is recorded, and a client's local file arrives as an upload
 * (the CLI in another directory, as a remote client would be).
 */
describe("artifacts from remote clients", () => {
  let pg: TestPostgres;
  let serverWs: Workspace;
  let clientWs: Workspace;
  let server: ServerProcess;
  let team: ApiClient;
  let allowed: Server;
  let other: Server;
  let otherHits = 0;
  let allowedPort = 0;
  let otherPort = 0;

  const request = async (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}) => {
    const res = await fetch(new URL(path, server.url), {
      method,
      headers: { authorization: `Bearer ${teamToken}`, ...headers },
      ...(body !== undefined && { body }),
    });
    return {
      status: res.status,
      json: (await res.json()) as { error?: { code: string; message: string }; created?: boolean; size?: number },
    };
  };
  let databaseUrl: string;
  const settings = () => ({
    auth: { tokens: [{ name: "team-a", tenant: "team-a", sha256: createHash("sha256").update(teamToken).digest("hex") }] },
    artifacts: {
      allowed_paths: ["./allowed"],
      allowed_urls: [`http://127.0.0.1:${allowedPort}/`],
      allowed_networks: ["127.0.0.1/32"],
      max_upload_size: "1KiB",
    },
  });
  const history = async () => (await team.list({ tenant: "team-a", limit: "1000" })).deploys;
  const tenantDescriptor = (app: string, source: string) => ({ ...descriptor(app, "test", source), tenant: "team-a" });

  before(async () => {
    allowed = createServer((req, res) => {
      if (req.url === "/to-loopback") return void res.writeHead(302, { location: `http://127.0.0.2:${otherPort}/app.txt` }).end();
      res.writeHead(404).end();
    });
    other = createServer((_req, res) => {
      otherHits++;
      res.end("not for tenants\n");
    });
    await new Promise<void>((r) => allowed.listen(0, "127.0.0.1", r));
    await new Promise<void>((r) => other.listen(0, "127.0.0.2", r));
    allowedPort = (allowed.address() as AddressInfo).port;
    otherPort = (other.address() as AddressInfo).port;

    pg = await TestPostgres.start();
    serverWs = await createWorkspace("manent-server-");
    clientWs = await createWorkspace("manent-client-");
    await serverWs.write("allowed/app.txt", "allowed\n");
    await serverWs.write("secret.txt", "the server's own\n");
    await symlink(serverWs.path("secret.txt"), serverWs.path("allowed/link-out.txt"));
    databaseUrl = await pg.createDatabase();
    const config = await serverWs.write("manent.yml", manentYml(databaseUrl, settings()));
    for (const app of ["shop", "big"]) {
      await serverWs.write(`envconfig/team-a/${app}/${app}/test.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        params: { state_dir: serverWs.path("state") },
      });
    }
    server = await startServer(config, { cwd: serverWs.dir });
    team = new ApiClient(server.url, teamToken);
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
    allowed?.close();
    other?.close();
  });

  it("refuses the server's files, paths outside the allowed roots, links out and unallowed addresses, recording nothing", async () => {
    const cases: [string, RegExp][] = [
      ["/etc/passwd", /is not under a directory the server allows/],
      ["/proc/self/environ", /is not under a directory the server allows/],
      [serverWs.path("secret.txt"), /is not under a directory the server allows/],
      [serverWs.path("allowed/link-out.txt"), /is not under a directory the server allows/],
      [serverWs.path("work/postgres/password"), /is not under a directory the server allows/],
      [`http://127.0.0.2:${otherPort}/app.txt`, /not under an allowed URL/],
      [`http://[::ffff:127.0.0.2]:${otherPort}/app.txt`, /not under an allowed URL/],
      ["http://169.254.169.254/latest/meta-data/", /not under an allowed URL/],
    ];
    for (const [source, why] of cases) {
      const r = await request("POST", "/api/v1/deploys", JSON.stringify({ descriptor: tenantDescriptor("shop", source) }), {
        "content-type": "application/json",
      });
      assert.equal(r.status, 400, `${source}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error!.code, "invalid_argument");
      assert.match(r.json.error!.message, why, source);
      assert.match(r.json.error!.message, /artifact\.source/);
      assert.doesNotMatch(r.json.error!.message, /root:|PATH=|not for tenants/);
    }
    // The --source override goes through the same rules.
    const overridden = await request(
      "POST",
      "/api/v1/deploys",
      JSON.stringify({ descriptor: tenantDescriptor("shop", serverWs.path("allowed/app.txt")), overrides: { source: "/etc/shadow" } }),
      {
        "content-type": "application/json",
      },
    );
    assert.equal(overridden.status, 400);
    assert.deepEqual(await history(), []);
    assert.equal(otherHits, 0, "nothing connected to the refused address");

    // Allowed: a file under an allowed directory.
    const ok = await team.submit({ descriptor: tenantDescriptor("shop", serverWs.path("allowed/app.txt")) });
    assert.equal((await team.deploy(ok.id, 60)).status, "succeeded");
  });

  it("refuses a redirect from an allowed URL to an address it does not allow, without connecting to it", async () => {
    const { id } = await team.submit({ descriptor: tenantDescriptor("shop", `http://127.0.0.1:${allowedPort}/to-loopback`) });
    const d = await team.deploy(id, 60);
    assert.equal(d.status, "failed");
    assert.equal(d.error!.code, "invalid_argument");
    assert.match(d.error!.message, /127\.0\.0\.2.*(loopback|not under an allowed URL)/);
    assert.equal(d.steps.find((s) => s.name === "fetch")!.attempts, 1, "a refusal is not retried");
    assert.equal(otherHits, 0);
  });

  it("deploys a file uploaded by the CLI from another directory; the upload is idempotent and private", async () => {
    const artifact = await clientWs.write("dist/app-2.0.0.txt", "uploaded from the client\n");
    const sha = createHash("sha256").update("uploaded from the client\n").digest("hex");
    await clientWs.write("shop.yml", {
      ...tenantDescriptor("shop", "dist/app-2.0.0.txt"),
      artifact: { type: "file", name: "shop", version: "2.0.0", source: "dist/app-2.0.0.txt" },
    });
    const cli = (...args: string[]) => runCli(args, { cwd: clientWs.dir, server: server.url, token: teamToken });

    const first = await cli("deploy", "-f", "shop.yml");
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const [latest] = await history();
    assert.equal(latest!.version, "2.0.0");
    const record = await team.deploy(latest!.id);
    assert.equal((record.request.descriptor as { artifact: { source: string } }).artifact.source, `upload:${sha}/app-2.0.0.txt`);
    assert.doesNotMatch(JSON.stringify(record.request), new RegExp(clientWs.dir), "the client's paths are not the server's business");
    assert.equal(await readFile(serverWs.path("work", "artifacts", "team-a", sha, "app-2.0.0.txt"), "utf8"), "uploaded from the client\n");

    // The same bytes again (--source, a new version): already on the server, so not sent again.
    const again = await cli("deploy", "-f", "shop.yml", "--version", "2.0.1", "--source", artifact);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    const put = await request("PUT", `/api/v1/uploads/${sha}`, "uploaded from the client\n");
    assert.equal(put.status, 200);
    assert.equal(put.json.created, false);

    // Private to the server's user; the workdir only lets the embedded Postgres's user through.
    assert.equal((await stat(serverWs.path("work"))).mode & 0o777, 0o711);
    for (const dir of ["work/artifacts", "work/artifacts/team-a"]) {
      assert.equal((await stat(serverWs.path(dir))).mode & 0o777, 0o700, dir);
    }
    assert.equal((await stat(serverWs.path("work", "artifacts", "team-a", sha, "app-2.0.0.txt"))).mode & 0o077, 0);
  });

  it("refuses an upload over the size limit, with the wrong sha256, for another tenant or an unknown one", async () => {
    await clientWs.write("dist/big.bin", Buffer.alloc(2048, 1).toString());
    await clientWs.write("big.yml", tenantDescriptor("big", "dist/big.bin"));
    const before = (await history()).length;
    const big = await runCli(["deploy", "-f", "big.yml"], { cwd: clientWs.dir, server: server.url, token: teamToken });
    assert.equal(big.code, 2, big.stdout + big.stderr);
    assert.match(big.stderr, /upload: larger than 1024 bytes \(artifacts\.max_upload_size in manent\.yml\)/);
    assert.equal((await history()).length, before);

    const body = Buffer.from("some bytes");
    const sha = createHash("sha256").update(body).digest("hex");
    const wrong = await request("PUT", `/api/v1/uploads/${"a".repeat(64)}`, body);
    assert.equal(wrong.status, 400);
    assert.match(wrong.json.error!.message, /sha256 is [0-9a-f]{64}, not a{64}/);
    assert.equal((await request("GET", `/api/v1/uploads/${"a".repeat(64)}`)).status, 404, "nothing kept");
    // Another tenant's uploads are neither stored nor shown: an upload there is forbidden (the caller named
    // that tenant itself, and is told where it may act), and reading one is not found, as its deploys are.
    const elsewhere = await request("PUT", `/api/v1/uploads/${sha}?tenant=team-b`, body);
    assert.equal(elsewhere.status, 403);
    assert.match(elsewhere.json.error!.message, /may not upload artifacts to tenant team-b: .*; its grants are in tenant team-a/);
    assert.equal((await request("GET", `/api/v1/uploads/${sha}?tenant=team-b`)).status, 404);
    assert.equal((await request("PUT", `/api/v1/uploads/${sha}?tenant=..%2F..%2Fetc`, body)).status, 400);
    assert.equal((await request("PUT", `/api/v1/uploads/not-a-sha`, body)).status, 400);
    // Streamed without a declared length: refused once the limit is passed.
    const chunked = await fetch(new URL(`/api/v1/uploads/${"b".repeat(64)}`, server.url), {
      method: "PUT",
      headers: { authorization: `Bearer ${teamToken}` },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < 4; i++) c.enqueue(new Uint8Array(512));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    assert.equal(chunked.status, 400);
    assert.match(((await chunked.json()) as { error: { message: string } }).error.message, /larger than 1024 bytes/);
    // An upload of another tenant cannot be named.
    const named = await request(
      "POST",
      "/api/v1/deploys",
      JSON.stringify({ descriptor: tenantDescriptor("shop", `upload:${"c".repeat(64)}/x.txt`) }),
      { "content-type": "application/json" },
    );
    assert.equal(named.status, 400);
    assert.match(named.json.error!.message, /no upload c{64} for tenant team-a/);
  });

  it("a server of the same fleet deploys an upload that another server received", async () => {
    const body = "received by the first server\n";
    const sha = createHash("sha256").update(body).digest("hex");
    const put = await request("PUT", `/api/v1/uploads/${sha}`, body);
    assert.equal(put.json.created, true, JSON.stringify(put.json));
    // The servers share one queue: with the first one stopped, the deploy is surely run by the second.
    await server.stop();

    // Another server on the same database, with a working directory of its own.
    const secondWs = await createWorkspace("manent-server-2-");
    await secondWs.write("envconfig/team-a/shop/shop/test.yml", {
      plugin: "noop",
      targets: [{ host: "shop-2" }],
      params: { state_dir: secondWs.path("state") },
    });
    const second = await startServer(
      await secondWs.write(
        "manent.yml",
        manentYml(undefined, { ...settings(), dbos: { database_url: databaseUrl, executor_id: "second" } }),
      ),
      { cwd: secondWs.dir },
    );
    try {
      const client = new ApiClient(second.url, teamToken);
      const { id } = await client.submit({
        descriptor: {
          ...tenantDescriptor("shop", `upload:${sha}/app-3.0.0.txt`),
          artifact: { type: "file", name: "shop", version: "3.0.0", source: `upload:${sha}/app-3.0.0.txt` },
        },
      });
      let d = await client.deploy(id, 60);
      while (!["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) d = await client.deploy(id, 60);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      assert.equal(await readFile(secondWs.path("work", "artifacts", "team-a", sha, "app-3.0.0.txt"), "utf8"), body);
    } finally {
      await second.stop();
    }
  });
});
