import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { databaseText } from "../support/database-text.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { DevVault } from "../support/vault.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * vault: references against a real Vault server (dev mode, TLS from its own CA, on 127.0.0.1):
 * one manent-server signs in with a short-lived renewable token, another with AppRole. The values
 * reach the plugin and appear in no log, output or database row; a token outlives its first lease
 * because it is renewed; an AppRole token near its max TTL is replaced by a new login; a Vault
 * that is down fails the step as unavailable (retried), a missing key or a path Vault refuses at
 * once (permanent), each naming the reference and never a value; a tenant cannot name another's path.
 */
describe("vault: secret references", () => {
  // Different lengths, so the length the noop plugin reports tells which value it read.
  const dbPassword = `vault-db-${randomBytes(10).toString("hex")}`;
  const apiKey = `vault-api-${randomBytes(16).toString("hex")}`;
  const otherTenants = `vault-team-b-${randomBytes(20).toString("hex")}`;
  let vault: DevVault;
  let db: TestPostgres;
  let ws: Workspace;
  let tokenServer: ServerProcess;
  let approleServer: ServerProcess;
  let tokenDb: string;
  let approleDb: string;
  let artifact: string;

  const envconfig = (tenant: string, app: string, secrets: Record<string, string>, extra: Record<string, unknown> = {}) =>
    ws.write(`envconfig/${tenant}/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { read_secret: Object.keys(secrets)[0]!, state_dir: ws.path("state", app) },
      secrets: Object.entries(secrets).map(([name, ref]) => ({ name, ref })),
      max_retries: 0,
      ...extra,
    });
  const submit = (server: ServerProcess, tenant: string, app: string) =>
    server.api.submit({ descriptor: { ...descriptor(app, "prod", artifact), tenant }, descriptor_file: `${app}.yml` });
  const secretLength = (d: { steps: { name: string; output?: unknown }[] }): string | undefined => {
    const out = d.steps.find((s) => s.name === "deploy")?.output as { result?: string } | undefined;
    return out?.result
      ? (JSON.parse(out.result) as { targets: { details: Record<string, string> }[] }).targets[0]!.details.secret_length
      : undefined;
  };

  before(async () => {
    [vault, db, ws] = await Promise.all([DevVault.start(), TestPostgres.start(), createWorkspace()]);
    [tokenDb, approleDb] = await Promise.all([db.createDatabase(), db.createDatabase()]);
    artifact = await ws.write("dist/app.txt", "x\n");
    await vault.put("team-a/app/db", { password: dbPassword, api_key: apiKey });
    await vault.put("team-a/denied/db", { password: dbPassword });
    await vault.put("team-b/db", { password: otherTenants });
    // manent's policy reads team-a/app/* only: team-a/denied is a path the tenant may name but Vault refuses.
    await vault.api("PUT", "sys/policies/acl/manent", { policy: 'path "secret/data/team-a/app/*" { capabilities = ["read"] }' });
    // A token of 9 s, renewable for an hour: it lives past its first lease only if manent renews it.
    const token = await vault.api<{ auth: { client_token: string } }>("POST", "auth/token/create", {
      policies: ["manent"],
      ttl: "9s",
      explicit_max_ttl: "1h",
      renewable: true,
    });
    await vault.api("POST", "sys/auth/approle", { type: "approle" });
    // An AppRole token of 9 s whose max TTL is 15 s: renewed once, then replaced by a new login.
    await vault.api("POST", "auth/approle/role/manent", { token_policies: ["manent"], token_ttl: "9s", token_max_ttl: "15s" });
    const roleId = (await vault.api<{ data: { role_id: string } }>("GET", "auth/approle/role/manent/role-id")).data.role_id;
    const secretId = (await vault.api<{ data: { secret_id: string } }>("POST", "auth/approle/role/manent/secret-id")).data.secret_id;
    await ws.write("vault/role-id", `${roleId}\n`);

    const stores = (auth: Record<string, unknown>) => ({
      secret_stores: {
        vault: {
          address: vault.address,
          ca_file: vault.caFile,
          auth,
          timeout: "5s",
          tenants: { "team-a": ["secret/team-a/"], "team-b": ["secret/team-b/"] },
        },
      },
    });
    const [tokenYml, approleYml] = await Promise.all([
      ws.write("token/manent.yml", { ...manentYml(tokenDb), ...stores({ method: "token", token: "env:MANENT_TEST_VAULT_TOKEN" }) }),
      ws.write("approle/manent.yml", {
        ...manentYml(approleDb),
        ...stores({ method: "approle", role_id: `file:${ws.path("vault/role-id")}`, secret_id: "env:MANENT_TEST_VAULT_SECRET_ID" }),
      }),
    ]);
    for (const dir of ["token", "approle"]) await ws.write(`${dir}/dist/app.txt`, "x\n");
    // Both servers read the envconfigs of the workspace (the provider's path is relative to cwd).
    [tokenServer, approleServer] = await Promise.all([
      startServer(tokenYml, { cwd: ws.dir, env: { MANENT_TEST_VAULT_TOKEN: token.auth.client_token } }),
      startServer(approleYml, { cwd: ws.dir, env: { MANENT_TEST_VAULT_SECRET_ID: secretId } }),
    ]);
  });
  after(async () => {
    await Promise.all([tokenServer?.stop(), approleServer?.stop()]);
    await Promise.all([vault?.remove(), db?.stop()]);
  });

  it("reads the value at the step with a token, renews the token before its lease ends, and reads again past that lease", async () => {
    await envconfig("team-a", "shop", { db: "vault:secret/team-a/app/db#password" });
    const first = await tokenServer.api.deploy((await submit(tokenServer, "team-a", "shop")).id, 60);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));
    assert.equal(secretLength(first), String(dbPassword.length), "the plugin read the Vault value");
    const signedIn = tokenServer.logs().length;
    assert.match(tokenServer.logs(), /vault: signed in with a token/);
    // Two renewals, each at two thirds of a 9 s lease: 12 s after the sign-in, past the first lease.
    await tokenServer.logged(/vault: token renewed/, signedIn);
    const second = tokenServer.logs().length;
    await tokenServer.logged(/vault: token renewed/, second);
    await envconfig("team-a", "cart", { key: "vault:secret/team-a/app/db#api_key" });
    const d = await tokenServer.api.deploy((await submit(tokenServer, "team-a", "cart")).id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(secretLength(d), String(apiKey.length));
    assert.doesNotMatch(tokenServer.logs().slice(signedIn), /signed in/, "the same token, renewed: no new sign-in");
  });

  it("signs in with AppRole, renews its token, and logs in again before the token's max TTL ends", async () => {
    await envconfig("team-a", "search", { db: "vault:secret/team-a/app/db#password" });
    const first = await approleServer.api.deploy((await submit(approleServer, "team-a", "search")).id, 60);
    assert.equal(first.status, "succeeded", JSON.stringify(first.error));
    assert.equal(secretLength(first), String(dbPassword.length));
    const from = approleServer.logs().length;
    assert.match(approleServer.logs(), /vault: signed in with AppRole/);
    // Renewed at 6 s (9 s more, within the 15 s max), then Vault gives only what is left: a new login.
    await approleServer.logged(/vault: token renewed/, from);
    await approleServer.logged(/vault: signed in with AppRole/, from);
    const d = await approleServer.api.deploy((await submit(approleServer, "team-a", "search")).id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
  });

  it("fails at once, naming the reference, when the key is missing or Vault refuses the path", async () => {
    for (const [app, ref, code, reason] of [
      ["nokey", "vault:secret/team-a/app/db#nope", "failed_precondition", /has no key "nope"/],
      ["nopath", "vault:secret/team-a/app/gone#password", "failed_precondition", /Vault has no secret at secret\/team-a\/app\/gone \(404/],
      ["denied", "vault:secret/team-a/denied/db#password", "permission_denied", /Vault refused to read it \(403/],
    ] as const) {
      await envconfig("team-a", app, { db: ref }, { max_retries: 5, retry_interval: "10ms" });
      const d = await tokenServer.api.deploy((await submit(tokenServer, "team-a", app)).id, 60);
      assert.equal(d.status, "failed", app);
      assert.equal(d.error?.code, code, `${app}: ${d.error?.message}`);
      assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, `${app}: permanent, not retried`);
      assert.ok(d.error!.message.includes(`secret "db": ${ref}: `), d.error!.message);
      assert.match(d.error!.message, reason);
    }
  });

  it("refuses at submission a path outside the tenant's, naming file, field and reason", async () => {
    await envconfig("team-a", "thief", { db: "vault:secret/team-b/db#password" });
    await ws.write("thief.yml", { ...descriptor("thief", "prod", artifact), tenant: "team-a" });
    const cli = await runCli(["deploy", "-f", "thief.yml"], { cwd: ws.dir, server: tokenServer.url });
    assert.notEqual(cli.code, 0);
    assert.ok(
      cli.stderr.includes(
        `./envconfig/team-a/thief/thief/prod.yml: secrets.0.ref: secret "db": vault:secret/team-b/db#password: tenant team-a may reference only Vault paths under secret/team-a/`,
      ),
      cli.stderr,
    );
    // A tenant no path is given to may name none.
    await envconfig("team-c", "stray", { db: "vault:secret/team-a/app/db#password" });
    await assert.rejects(submit(tokenServer, "team-c", "stray"), /tenant team-c may reference no Vault path/);
  });

  it("never puts a value in the server's log, the CLI's output or the database", async () => {
    const history = await runCli(["history", "-o", "json"], { cwd: ws.dir, server: tokenServer.url });
    const rows = (await databaseText(tokenDb)) + (await databaseText(approleDb));
    assert.ok(rows.includes("vault:secret/team-a/app/db#password"), "the reference is recorded, as it should be");
    for (const [where, text] of [
      ["token server's log", tokenServer.logs()],
      ["AppRole server's log", approleServer.logs()],
      ["CLI output", history.stdout + history.stderr],
      ["database", rows],
    ] as const) {
      for (const value of [dbPassword, apiKey, otherTenants])
        assert.equal(text.includes(value), false, `a Vault value leaked into the ${where}`);
      assert.equal(text.includes(vault.rootToken), false, `the root token leaked into the ${where}`);
    }
  });

  it("fails as unavailable, retried, while Vault is down, naming the reference", async () => {
    await envconfig("team-a", "outage", { db: "vault:secret/team-a/app/db#password" }, { max_retries: 2, retry_interval: "10ms" });
    await vault.stop();
    const d = await tokenServer.api.deploy((await submit(tokenServer, "team-a", "outage")).id, 60);
    assert.equal(d.status, "failed");
    assert.equal(d.error?.code, "unavailable", d.error?.message);
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3, "retried as max_retries allows");
    assert.match(
      d.error!.message,
      /secret "db": vault:secret\/team-a\/app\/db#password: Vault at https:\/\/127\.0\.0\.1:\d+ cannot be reached: ECONNREFUSED/,
    );
  });
});
