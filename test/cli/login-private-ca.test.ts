import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { tlsFetch } from "../../src/cli/tls-transport.js";
import { approveDevice, launchChromium } from "../support/browser.js";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, serverBin, startCliUntil, startServer, type ServerProcess } from "../support/server-process.js";
import { TestCa } from "../support/test-ca.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

/**
 * An organisation's own provider on https, signed by its private CA (as manent-server's
 * certificate is): manent-server trusts it through `auth.oidc.ca_file`, the CLI through
 * `--ca-file`, for the sign-in, the ID token's keys and the token's renewal.
 */
describe("sign-in with a provider signed by a private CA", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let ca: TestCa;
  let provider: RunningOidcProvider;
  let server: ServerProcess;
  let chromium: Awaited<ReturnType<typeof launchChromium>>;
  let env: Record<string, string>;
  const credentialsPath = () => join(ws.path("config"), "manent", "credentials.json");
  const oidc = (issuer: string, extra: object = {}) => ({
    tokens: [],
    grants: [{ role: "viewer", groups: ["deployers"] }],
    oidc: { issuer, client_id: "manent", client_secret: "env:OIDC_SECRET", cli_client_id: "manent-cli", ...extra },
  });

  before(async () => {
    [pg, ws, ca] = await Promise.all([TestPostgres.start(), createWorkspace(), TestCa.create("acme-private-ca")]);
    const [providerCert, serverCert] = await Promise.all([ca.server(), ca.server()]);
    provider = await startOidcProvider({
      client: { id: "manent", secret: "private-ca-client-secret-5e1" },
      tls: { cert: providerCert.certPem, key: providerCert.keyPem },
    });
    await Promise.all([
      ws.write("tls/server.crt", serverCert.certPem),
      ws.write("tls/server.key", serverCert.keyPem),
      ws.write("acme-ca.crt", ca.certPem),
    ]);
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: oidc(provider.issuer, { ca_file: "acme-ca.crt" }),
        tls: { cert_file: "tls/server.crt", key_file: "tls/server.key" },
      }),
    );
    server = await startServer(config, {
      cwd: ws.dir,
      env: { OIDC_SECRET: "private-ca-client-secret-5e1" },
      fetch: await tlsFetch({ caFile: ws.path("acme-ca.crt") }),
    });
    env = { XDG_CONFIG_HOME: ws.path("config") };
    chromium = await launchChromium();
  });
  after(async () => {
    await chromium?.close();
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  it("signs in by the device flow with --ca-file, and renews the ID token through the same CA", async () => {
    assert.match(provider.issuer, /^https:/);
    const { match: prompt, exited } = await startCliUntil(
      ["--server", server.url, "--ca-file", ws.path("acme-ca.crt"), "login", "--device"],
      /open (\S+) and enter the code (\S+)/,
      { cwd: ws.dir, env },
    );
    await approveDevice(chromium.browser, prompt[1]!, prompt[2]!, "alice", { ignoreHTTPSErrors: true });
    const { code, stdout, stderr } = await exited;
    assert.equal(code, 0, stderr);
    assert.equal(stdout, `Signed in to ${server.url} as alice@example.com\n`);

    // manent-server verifies the ID token against keys it read from the provider through ca_file.
    const viewed = await runCli(["--ca-file", ws.path("acme-ca.crt"), "plugins"], { cwd: ws.dir, server: server.url, env });
    assert.equal(viewed.code, 0, viewed.stderr);

    const file = JSON.parse(await readFile(credentialsPath(), "utf8")) as { servers: Record<string, { expires_at: number }> };
    file.servers[server.url]!.expires_at = Math.floor(Date.now() / 1000) - 10;
    await writeFile(credentialsPath(), JSON.stringify(file), { mode: 0o600 });
    const refreshes = provider.grants.filter((g) => g === "refresh_token").length;
    const renewed = await runCli(["--ca-file", ws.path("acme-ca.crt"), "plugins"], { cwd: ws.dir, server: server.url, env });
    assert.equal(renewed.code, 0, renewed.stderr);
    assert.equal(provider.grants.filter((g) => g === "refresh_token").length, refreshes + 1);
  });

  it("refuses to start when auth.oidc.ca_file cannot be read or holds no certificate, naming the field", async () => {
    await ws.write("not-a-ca.crt", "just text\n");
    for (const [caFile, why] of [
      ["missing-ca.crt", /cannot read .*missing-ca\.crt: ENOENT/],
      ["not-a-ca.crt", /not-a-ca\.crt holds no PEM certificate/],
    ] as const) {
      const file = await ws.write(
        "refused.yml",
        manentYml(await pg.createDatabase(), { auth: oidc(provider.issuer, { ca_file: caFile }) }),
      );
      const child = spawn(process.execPath, [serverBin, "-c", file, "serve"], {
        cwd: ws.dir,
        env: { ...process.env, OIDC_SECRET: "private-ca-client-secret-5e1" },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const [code] = (await once(child, "exit")) as [number | null];
      assert.notEqual(code, 0);
      assert.match(stderr, /refused\.yml: auth\.oidc\.ca_file: /);
      assert.match(stderr, why);
    }
  });
});
