import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as oidc from "openid-client";
import { approveDevice, launchChromium, signInAtProvider } from "../support/browser.js";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startCliUntil, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

interface Credentials {
  servers: Record<
    string,
    { id_token: string; refresh_token?: string; expires_at: number; name: string; issuer: string; client_id: string }
  >;
}

/**
 * `manent login` against a real OpenID provider: the device flow (the person approves on the
 * provider's pages in Chromium, as on another machine), the browser flow on a loopback redirect,
 * the stored credentials (owner-only), their renewal, and `manent logout`.
 */
describe("manent login and logout", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let provider: RunningOidcProvider;
  let server: ServerProcess;
  let chromium: Awaited<ReturnType<typeof launchChromium>>;
  let env: Record<string, string>;
  let credentialsPath: string;

  const startCli = (args: string[], ready: RegExp) =>
    startCliUntil(args, ready, { cwd: ws.dir, env: { MANENT_SERVER: server.url, ...env } });
  const credentials = async () => JSON.parse(await readFile(credentialsPath, "utf8")) as Credentials;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    provider = await startOidcProvider({ client: { id: "manent", secret: "cli-test-client-secret-0c4b" } });
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          tokens: [],
          grants: [{ role: "viewer", groups: ["viewers", "deployers"] }],
          oidc: { issuer: provider.issuer, client_id: "manent", client_secret: "env:OIDC_SECRET", cli_client_id: "manent-cli" },
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { OIDC_SECRET: "cli-test-client-secret-0c4b" } });
    provider.setRedirectUris([`${server.url}/auth/callback`]);
    // The reader's own configuration directory (XDG), empty at first.
    env = { XDG_CONFIG_HOME: ws.path("config") };
    credentialsPath = join(ws.path("config"), "manent", "credentials.json");
    chromium = await launchChromium();
  });
  after(async () => {
    await chromium?.close();
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  it("signs in by the device flow and keeps the credentials owner-only", async () => {
    const { match, exited } = await startCli(["login", "--device"], /open (\S+) and enter the code (\S+)/);
    await approveDevice(chromium.browser, match[1]!, match[2]!, "alice");
    const done = await exited;
    assert.equal(done.code, 0, done.stderr);
    assert.equal(done.stdout, `Signed in to ${server.url} as alice@example.com\n`);

    assert.equal((await stat(credentialsPath)).mode & 0o777, 0o600);
    assert.equal((await stat(join(ws.path("config"), "manent"))).mode & 0o777, 0o700);
    const stored = (await credentials()).servers[server.url]!;
    assert.equal(stored.name, "alice@example.com");
    assert.ok(stored.refresh_token, "a refresh token was kept, to renew the ID token");

    // The next commands send it: the server knows alice, with her group's role.
    const plugins = await runCli(["plugins"], { cwd: ws.dir, server: server.url, env });
    assert.equal(plugins.code, 0, plugins.stderr);
  });

  it("renews an expired ID token with the refresh token", async () => {
    const file = await credentials();
    const stored = file.servers[server.url]!;
    stored.expires_at = Math.floor(Date.now() / 1000) - 10;
    await writeFile(credentialsPath, JSON.stringify(file), { mode: 0o600 });
    const refreshesBefore = provider.grants.filter((g) => g === "refresh_token").length;
    const plugins = await runCli(["plugins"], { cwd: ws.dir, server: server.url, env });
    assert.equal(plugins.code, 0, plugins.stderr);
    // The provider granted one refresh; the token itself may equal the old one when both were
    // issued within one second (same claims, same iat, a deterministic RS256 signature).
    assert.equal(provider.grants.filter((g) => g === "refresh_token").length, refreshesBefore + 1);
    const renewed = (await credentials()).servers[server.url]!;
    assert.ok(renewed.id_token, "a renewed ID token is stored");
    assert.ok(renewed.expires_at > Date.now() / 1000);
  });

  it("signs in in a browser on a loopback redirect (PKCE)", async () => {
    const { match, exited } = await startCli(["login", "--no-browser"], /Sign in at (\S+)/);
    // The browser the CLI would open, of a person not signed in at the provider yet.
    const context = await chromium.browser.newContext();
    const page = await context.newPage();
    await page.goto(match[1]!);
    await signInAtProvider(page, "bob");
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByText("sign-in received").waitFor();
    await context.close();
    const done = await exited;
    assert.equal(done.code, 0, done.stderr);
    assert.equal(done.stdout, `Signed in to ${server.url} as bob@example.com\n`);
    assert.equal((await credentials()).servers[server.url]!.name, "bob@example.com");
  });

  it("signs out: forgets the credentials and revokes the refresh token at the provider", async () => {
    const stored = (await credentials()).servers[server.url]!;
    const out = await runCli(["logout"], { cwd: ws.dir, server: server.url, env });
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, `Signed out of ${server.url} (bob@example.com)\n`);
    assert.equal((await credentials()).servers[server.url], undefined);
    const config = await oidc.discovery(new URL(provider.issuer), "manent-cli", undefined, oidc.None(), {
      execute: [oidc.allowInsecureRequests],
    });
    await assert.rejects(oidc.refreshTokenGrant(config, stored.refresh_token!), (e: oidc.ResponseBodyError) => e.error === "invalid_grant");
    // Without credentials the server asks for them.
    const plugins = await runCli(["plugins"], { cwd: ws.dir, server: server.url, env });
    assert.equal(plugins.code, 3);
    assert.match(plugins.stderr, /missing bearer token/);
  });
});
