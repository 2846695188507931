import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { databaseText } from "../support/database-text.js";
import { collect, type Collected } from "../support/event-stream.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { DevVault, vaultBinary } from "../support/vault.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

// A safety net only: every wait below is for an event (a log line, a deploy's end), so a missing
// event fails its test here instead of hanging the run.
const bounded = { timeout: 180_000 };

/**
 * vault: references against a real Vault server (scripts/ci/vault.sh's build, in dev mode, TLS
 * from its own CA, on 127.0.0.1): one manent-server signs in with a short-lived renewable token,
 * another with AppRole. The values reach the plugin and appear in no log, output, event or
 * database row; the token outlives its first lease because manent renews it, as Vault's own lookup
 * shows; an AppRole token that reaches its max TTL is replaced by a new login; a missing key, path
 * or version or a path Vault refuses fails at once (permanent), a sealed or stopped Vault fails as
 * unavailable (retried), each naming the reference; a tenant cannot name another's path.
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
  let secretId: string;
  let manentToken: string | undefined;
  let rotatedToken: string | undefined;
  const streams: Collected[] = [];
  /** Each deploy by its application's name, for the CLI's `status` of some. */
  const deployIds = new Map<string, [ServerProcess, string]>();

  const envconfig = (tenant: string, app: string, secrets: Record<string, string>, extra: Record<string, unknown> = {}) =>
    ws.write(`envconfig/${tenant}/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { read_secret: Object.keys(secrets)[0]!, state_dir: ws.path("state", app) },
      secrets: Object.entries(secrets).map(([name, ref]) => ({ name, ref })),
      max_retries: 0,
      ...extra,
    });
  const deploy = async (server: ServerProcess, tenant: string, app: string) => {
    const { id } = await server.api.submit({ descriptor: { ...descriptor(app, "prod", artifact), tenant }, descriptor_file: `${app}.yml` });
    deployIds.set(app, [server, id]);
    return server.api.deploy(id, 120);
  };
  const secretLength = (d: { steps: { name: string; output?: unknown }[] }): string | undefined => {
    const out = d.steps.find((s) => s.name === "deploy")?.output as { result?: string } | undefined;
    return out?.result
      ? (JSON.parse(out.result) as { targets: { details: Record<string, string> }[] }).targets[0]!.details.secret_length
      : undefined;
  };
  /** Where the log holds `line` next from `from` on, once the server has written it (an event, not a delay). */
  const nextLogged = async (server: ServerProcess, line: RegExp, from: number): Promise<number> => {
    const found = await server.logged(line, from);
    return server.logs().indexOf(found, from) + found.length;
  };

  before(async () => {
    // Before anything starts: without scripts/ci/vault.sh's build, every test fails saying so.
    vaultBinary();
    [vault, db, ws] = await Promise.all([DevVault.start(), TestPostgres.start(), createWorkspace()]);
    [tokenDb, approleDb] = await Promise.all([db.createDatabase(), db.createDatabase()]);
    artifact = await ws.write("dist/app.txt", "x\n");
    await vault.put("team-a/app/db", { password: dbPassword, api_key: apiKey });
    await vault.put("team-a/app/old", { password: dbPassword });
    await vault.api("DELETE", "secret/data/team-a/app/old");
    await vault.put("team-a/denied/db", { password: dbPassword });
    await vault.put("team-b/db", { password: otherTenants });
    // manent's policy reads team-a/app/* only: team-a/denied is a path the tenant may name but Vault refuses.
    await vault.api("PUT", "sys/policies/acl/manent", { policy: 'path "secret/data/team-a/app/*" { capabilities = ["read"] }' });
    await vault.api("POST", "sys/auth/approle", { type: "approle" });
    // AppRole tokens of 9 s that may live 12 s: the first renewal is capped at what is left, so a new login follows.
    // Their lease starts at manent's login, at the first read: nothing here races the servers' start.
    await vault.api("POST", "auth/approle/role/manent", { token_policies: ["manent"], token_ttl: "9s", token_max_ttl: "12s" });
    const roleId = (await vault.api<{ data: { role_id: string } }>("GET", "auth/approle/role/manent/role-id")).data.role_id;
    secretId = (await vault.api<{ data: { secret_id: string } }>("POST", "auth/approle/role/manent/secret-id")).data.secret_id;
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
    // The token server reads its token from a file the first test writes right before the first read.
    const [tokenYml, approleYml] = await Promise.all([
      ws.write("token/manent.yml", { ...manentYml(tokenDb), ...stores({ method: "token", token: `file:${ws.path("vault/token")}` }) }),
      ws.write("approle/manent.yml", {
        ...manentYml(approleDb),
        ...stores({ method: "approle", role_id: `file:${ws.path("vault/role-id")}`, secret_id: "env:MANENT_TEST_VAULT_SECRET_ID" }),
      }),
    ]);
    // Both servers read the envconfigs of the workspace (the provider's path is relative to cwd).
    [tokenServer, approleServer] = await Promise.all([
      startServer(tokenYml, { cwd: ws.dir }),
      startServer(approleYml, { cwd: ws.dir, env: { MANENT_TEST_VAULT_SECRET_ID: secretId } }),
    ]);
    for (const server of [tokenServer, approleServer]) streams.push(collect(server.url, "", "/api/v1/events"));
    await Promise.all(streams.map((s) => s.opened));
  });
  after(async () => {
    await Promise.all(streams.map((s) => s.stop()));
    await Promise.all([tokenServer?.stop(), approleServer?.stop()]);
    await Promise.all([vault?.remove(), db?.stop()]);
  });

  // The two lease tests spend most of their time waiting for Vault's clock (a renewal at two thirds
  // of a 15 s and of a 9 s lease), each on its own server, token and Vault auth path: they wait
  // side by side instead of one after the other.
  describe("leases", { concurrency: 2 }, () => {
    it("reads with a token, renews it before its lease ends, and reads with it again past that lease", bounded, async () => {
      // A token of 15 s, renewable for an hour, made right before the read that signs in with it.
      manentToken = (
        await vault.api<{ auth: { client_token: string } }>("POST", "auth/token/create", {
          policies: ["manent"],
          ttl: "15s",
          explicit_max_ttl: "1h",
          renewable: true,
        })
      ).auth.client_token;
      await ws.write("vault/token", `${manentToken}\n`);
      const firstLeaseEnds = Date.parse((await vault.lookupToken(manentToken)).expire_time!);
      await envconfig("team-a", "shop", { db: "vault:secret/team-a/app/db#password" });
      const first = await deploy(tokenServer, "team-a", "shop");
      assert.equal(first.status, "succeeded", JSON.stringify(first.error));
      assert.equal(secretLength(first), String(dbPassword.length), "the plugin read the Vault value");
      const signedIn = await nextLogged(tokenServer, /vault: signed in with a token/, 0);
      // Each renewal manent logs is checked against Vault's own record of the token, until Vault says
      // it was renewed after the moment its first lease would have ended (two renewals at two thirds).
      let from = signedIn;
      let renewed: number | undefined;
      for (let n = 0; n < 4 && !(renewed! > firstLeaseEnds); n++) {
        from = await nextLogged(tokenServer, /vault: token renewed/, from);
        const seen = await vault.lookupToken(manentToken);
        assert.ok(seen.last_renewal, `Vault has no renewal of the token after manent logged one: ${JSON.stringify(seen)}`);
        renewed = Date.parse(seen.last_renewal);
        assert.ok(Date.parse(seen.expire_time!) > firstLeaseEnds, "a renewal moved the token's expiry past its first lease");
      }
      assert.ok(renewed! > firstLeaseEnds, "Vault renewed the token after its first lease would have ended");
      await envconfig("team-a", "cart", { key: "vault:secret/team-a/app/db#api_key" });
      const second = await deploy(tokenServer, "team-a", "cart");
      assert.equal(second.status, "succeeded", JSON.stringify(second.error));
      assert.equal(secretLength(second), String(apiKey.length));
      assert.doesNotMatch(tokenServer.logs().slice(signedIn), /signed in/, "the same token, renewed: no new sign-in");
      assert.ok((await vault.lookupToken(manentToken)).ttl > 0, "Vault still holds the token");
    });

    it("signs in with AppRole, renews its token, and logs in again when Vault caps the renewal at the max TTL", bounded, async () => {
      await envconfig("team-a", "search", { db: "vault:secret/team-a/app/db#password" });
      const first = await deploy(approleServer, "team-a", "search");
      assert.equal(first.status, "succeeded", JSON.stringify(first.error));
      assert.equal(secretLength(first), String(dbPassword.length));
      const login = await nextLogged(approleServer, /vault: signed in with AppRole/, 0);
      // Renewed at two thirds of 9 s: Vault gives only what is left of the 12 s, less than the 9 asked, so manent logs in again.
      const renewal = await nextLogged(approleServer, /vault: token renewed/, login);
      const renewedLine = approleServer.logs().slice(login, renewal).split("\n").at(-1)!;
      const { ttl_seconds } = JSON.parse(renewedLine) as { ttl_seconds: number };
      assert.ok(ttl_seconds < 9, `Vault capped the renewal at the max TTL: ${renewedLine}`);
      // Vault's own record of the login's token, while it lives: renewed, and capped.
      const [firstToken, ...others] = await vault.tokensIssuedAt("auth/approle/login");
      assert.equal(others.length, 0, "one login so far");
      assert.ok(firstToken!.last_renewal, `Vault renewed the login's token: ${JSON.stringify(firstToken)}`);
      assert.ok(firstToken!.ttl < 9, "Vault capped its lease");
      assert.equal(firstToken!.meta?.role_name, "manent");
      await nextLogged(approleServer, /vault: signed in with AppRole/, renewal);
      const second = (await vault.tokensIssuedAt("auth/approle/login")).filter((t) => t.accessor !== firstToken!.accessor);
      assert.equal(second.length, 1, "Vault issued a second token to a new login");
      assert.ok(Date.parse(second[0]!.issue_time) > Date.parse(firstToken!.issue_time));
      const again = await deploy(approleServer, "team-a", "search");
      assert.equal(again.status, "succeeded", JSON.stringify(again.error));
      assert.equal(secretLength(again), String(dbPassword.length));
    });
  });

  it(
    "fails at once, naming the reference, when the key, the path or its latest version is missing or Vault refuses the path",
    bounded,
    async () => {
      for (const [app, ref, code, reason] of [
        ["nokey", "vault:secret/team-a/app/db#nope", "failed_precondition", /the secret at secret\/team-a\/app\/db has no key "nope"/],
        [
          "nopath",
          "vault:secret/team-a/app/gone#password",
          "failed_precondition",
          /Vault has no secret at secret\/team-a\/app\/gone \(404: no such path, or no KV v2 engine mounted at secret\)/,
        ],
        [
          "deleted",
          "vault:secret/team-a/app/old#password",
          "failed_precondition",
          /the latest version \(version 1\) of the secret at secret\/team-a\/app\/old is deleted \(404/,
        ],
        ["denied", "vault:secret/team-a/denied/db#password", "permission_denied", /Vault refused to read it \(403/],
      ] as const) {
        await envconfig("team-a", app, { db: ref }, { max_retries: 5, retry_interval: "10ms" });
        const d = await deploy(tokenServer, "team-a", app);
        assert.equal(d.status, "failed", app);
        assert.equal(d.error?.code, code, `${app}: ${d.error?.message}`);
        assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, `${app}: permanent, not retried`);
        assert.ok(d.error!.message.includes(`secret "db": ${ref}: `), d.error!.message);
        assert.match(d.error!.message, reason);
      }
    },
  );

  it("refuses at submission a path outside the tenant's, naming file, field and reason", bounded, async () => {
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
    await assert.rejects(
      tokenServer.api.submit({ descriptor: { ...descriptor("stray", "prod", artifact), tenant: "team-c" }, descriptor_file: "stray.yml" }),
      /tenant team-c may reference no Vault path/,
    );
  });

  it("fails as unavailable, retried, while Vault is sealed, naming the reference; reads again once unsealed", bounded, async () => {
    await envconfig("team-a", "sealed", { db: "vault:secret/team-a/app/db#password" }, { max_retries: 2, retry_interval: "10ms" });
    await vault.seal();
    const d = await deploy(tokenServer, "team-a", "sealed");
    assert.equal(d.status, "failed");
    assert.equal(d.error?.code, "unavailable", d.error?.message);
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3, "retried as max_retries allows");
    assert.match(
      d.error!.message,
      /^secret "db": vault:secret\/team-a\/app\/db#password: Vault at https:\/\/127\.0\.0\.1:\d+ answered 503 \(sealed/,
    );
    await vault.unseal();
    const healed = await deploy(tokenServer, "team-a", "sealed");
    assert.equal(healed.status, "succeeded", JSON.stringify(healed.error));
    assert.equal(secretLength(healed), String(dbPassword.length));
  });

  it("fails as unauthenticated, at once, once the token is revoked; reads with the new token written to its file", bounded, async () => {
    await vault.api("POST", "auth/token/revoke", { token: manentToken });
    await envconfig("team-a", "revoked", { db: "vault:secret/team-a/app/db#password" }, { max_retries: 5, retry_interval: "10ms" });
    const d = await deploy(tokenServer, "team-a", "revoked");
    assert.equal(d.status, "failed");
    assert.equal(d.error?.code, "unauthenticated", d.error?.message);
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, "permanent, not retried");
    assert.match(
      d.error!.message,
      /^secret "db": vault:secret\/team-a\/app\/db#password: Vault refused the token of secret_stores\.vault\.auth\.token \(403\)/,
    );
    // The operator rotates the token file: the next read signs in with it, without a restart.
    rotatedToken = (await vault.api<{ auth: { client_token: string } }>("POST", "auth/token/create", { policies: ["manent"], ttl: "1h" }))
      .auth.client_token;
    await ws.write("vault/token", `${rotatedToken}\n`);
    const healed = await deploy(tokenServer, "team-a", "revoked");
    assert.equal(healed.status, "succeeded", JSON.stringify(healed.error));
    assert.equal(secretLength(healed), String(dbPassword.length));
  });

  it("never puts a value or a credential in the servers' logs, the CLI's output, the events or the database", bounded, async () => {
    const cli: string[] = [];
    for (const server of [tokenServer, approleServer]) {
      const history = await runCli(["history", "-o", "json", "--limit", "100"], { cwd: ws.dir, server: server.url });
      assert.equal(history.code, 0, history.stderr);
      cli.push(history.stdout, history.stderr);
    }
    // A deploy that read each value, and failures whose errors name the reference.
    for (const app of ["shop", "cart", "search", "nokey", "deleted"]) {
      const [server, id] = deployIds.get(app)!;
      const status = await runCli(["status", id, "-o", "json"], { cwd: ws.dir, server: server.url });
      assert.ok(status.stdout.includes(id), `${app}: ${status.stderr}`);
      cli.push(status.stdout, status.stderr);
    }
    const rows = (await databaseText(tokenDb)) + (await databaseText(approleDb));
    const events = JSON.stringify(streams.flatMap((s) => s.events));
    for (const [what, text] of [
      ["database", rows],
      ["events", events],
      ["CLI output", cli.join("\n")],
    ] as const)
      assert.ok(text.includes("vault:secret/team-a/app/db#password"), `the reference is in the ${what}, as it should be`);
    assert.ok(events.includes("secret/team-a/app/gone"), "the events carry the failures' messages");
    for (const [where, text] of [
      ["token server's log", tokenServer.logs()],
      ["AppRole server's log", approleServer.logs()],
      ["CLI output", cli.join("\n")],
      ["events", events],
      ["database", rows],
    ] as const) {
      for (const value of [dbPassword, apiKey, otherTenants])
        assert.equal(text.includes(value), false, `a Vault value leaked into the ${where}`);
      for (const credential of [manentToken!, rotatedToken!, secretId, vault.rootToken])
        assert.equal(text.includes(credential), false, `a Vault credential leaked into the ${where}`);
    }
  });

  it("fails as unavailable, retried, while Vault is down, naming the reference", bounded, async () => {
    await envconfig("team-a", "outage", { db: "vault:secret/team-a/app/db#password" }, { max_retries: 2, retry_interval: "10ms" });
    await vault.stop();
    const d = await deploy(tokenServer, "team-a", "outage");
    assert.equal(d.status, "failed");
    assert.equal(d.error?.code, "unavailable", d.error?.message);
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3, "retried as max_retries allows");
    assert.match(
      d.error!.message,
      /^secret "db": vault:secret\/team-a\/app\/db#password: Vault at https:\/\/127\.0\.0\.1:\d+ cannot be reached: ECONNREFUSED/,
    );
  });
});
