import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ApiClient } from "../../src/cli/api-client.js";
import { tokenPattern } from "../../src/server/tokens/token-secret.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const rootToken = "tokens-root-0123456789";
const teamAdminToken = "tokens-team-a-admin-0123";
const teamDeployerToken = "tokens-team-a-deployer-0123";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** What a request with this bearer token gets: status and error. */
async function call(url: string, token: string, path = "/api/v1/deploys?limit=1") {
  const r = await fetch(new URL(path, url), { headers: { authorization: `Bearer ${token}` } });
  const body = (await r.json()) as { error?: { code: string; message: string } };
  return { status: r.status, error: body.error };
}

/**
 * Managed API tokens on a fleet of two servers sharing one database: created through one, used
 * and revoked through either; refused by the other server from the next request after the revoke.
 */
describe("managed API tokens", () => {
  let testPg: TestPostgres;
  let databaseUrl: string;
  let ws: Workspace;
  let alpha: ServerProcess;
  let beta: ServerProcess;
  let artifact: string;
  const secrets: string[] = [];

  before(async () => {
    testPg = await TestPostgres.start();
    ws = await createWorkspace();
    databaseUrl = await testPg.createDatabase();
    artifact = await ws.write("dist/app.txt", "tokens\n");
    for (const tenant of ["team-a", "team-b"])
      await ws.write(`envconfig/${tenant}/shop/shop/test.yml`, {
        plugin: "noop",
        targets: [{ host: `${tenant}-1` }],
        params: { state_dir: ws.path("state") },
      });
    const auth = {
      tokens: [
        { name: "root", tenant: "*", sha256: sha(rootToken) },
        { name: "team-a-admin", tenant: "team-a", role: "admin", sha256: sha(teamAdminToken) },
        { name: "team-a-deployer", tenant: "team-a", role: "deployer", sha256: sha(teamDeployerToken) },
      ],
    };
    const servers: ServerProcess[] = [];
    for (const executor of ["alpha", "beta"]) {
      const config = await ws.write(
        `${executor}.yml`,
        manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: executor }, workdir: `./work-${executor}`, auth }),
      );
      servers.push(await startServer(config, { cwd: ws.dir, token: rootToken }));
    }
    [alpha, beta] = servers as [ServerProcess, ServerProcess];
  });
  after(async () => {
    await Promise.all([alpha?.stop(), beta?.stop()]);
    await testPg?.stop();
  });

  const create = (client: ApiClient, body: Record<string, unknown>) =>
    client.createToken({ role: "deployer", tenant: "team-a", expires_in: "30d", ...body });

  it("created with the CLI (shown once), used on the other server, revoked: refused there from the next request on", async () => {
    // What a person at a terminal reads (-o text): a pipe would get the token as JSON.
    const made = await runCli(
      ["token", "create", "--role", "deployer", "--tenant", "team-a", "--expires", "30d", "--name", "ci-team-a", "-o", "text"],
      {
        cwd: ws.dir,
        server: alpha.url,
        token: rootToken,
      },
    );
    assert.equal(made.code, 0, made.stderr);
    const secret = tokenPattern.exec(made.stdout)?.[0];
    assert.ok(secret, made.stdout);
    secrets.push(secret);
    assert.match(made.stdout, /created token ci-team-a \(id [0-9a-f-]{36}\): deployer in tenant team-a, application \*, environment \*/);
    assert.match(made.stdout, /only time the token is shown/);

    // Used through the other server: a deploy in its tenant, refused elsewhere.
    const ci = new ApiClient(beta.url, secret);
    const { id } = await ci.submit({
      descriptor: { ...descriptor("shop", "test", artifact), tenant: "team-a" },
      descriptor_file: "shop.yml",
    });
    const deployed = await ci.deploy(id, 60);
    assert.equal(deployed.status, "succeeded", JSON.stringify(deployed.error));
    assert.equal(deployed.submitted_by, "ci-team-a");
    await assert.rejects(ci.submit({ descriptor: { ...descriptor("shop", "test", artifact), tenant: "team-b" } }), (e: Error) =>
      /permission|not found/i.test(e.message),
    );

    const listed = await runCli(["token", "list", "-o", "text"], { cwd: ws.dir, server: beta.url, token: rootToken });
    assert.equal(listed.code, 0, listed.stderr);
    const row = listed.stdout.split("\n").find((l) => l.includes("\tci-team-a\t"));
    assert.ok(row, listed.stdout);
    const [tokenId, , role, tenant, application, environment, status, , lastUsed, createdBy] = row.split("\t");
    assert.deepEqual([role, tenant, application, environment, status, createdBy], ["deployer", "team-a", "*", "*", "active", "root"]);
    assert.ok(Date.parse(lastUsed!) > 0, `last use recorded: ${row}`);

    const revoked = await runCli(["token", "revoke", tokenId!, "-o", "text"], { cwd: ws.dir, server: alpha.url, token: rootToken });
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, /revoked token ci-team-a/);
    // The very next request on the other server, with no wait: refused, saying why, without the token.
    const refused = await call(beta.url, secret);
    assert.equal(refused.status, 401);
    assert.match(refused.error!.message, /^API token ci-team-a was revoked at \S+ by root$/);
    assert.equal((await call(alpha.url, secret)).status, 401);

    const again = await runCli(["token", "revoke", tokenId!], { cwd: ws.dir, server: beta.url, token: rootToken });
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already revoked at .* by root/);
  });

  it("an expired token is refused, naming when it expired", async () => {
    const t = await create(alpha.api, { name: "short-lived", expires_in: "1m" });
    secrets.push(t.token);
    assert.equal((await call(beta.url, t.token)).status, 200);
    // A minute passing, as the database's clock judges expiry for the whole fleet.
    const db = new pg.Client(databaseUrl);
    await db.connect();
    try {
      await db.query(`update manent.api_tokens set expires_at = now() - interval '1 second' where id = $1`, [t.id]);
    } finally {
      await db.end();
    }
    const refused = await call(beta.url, t.token);
    assert.equal(refused.status, 401);
    assert.match(refused.error!.message, /^API token short-lived expired at \d{4}-\d\d-\d\dT/);
    const listed = (await alpha.api.tokens({})).tokens.find((x) => x.id === t.id);
    assert.equal(listed?.status, "expired");
  });

  it("never more rights than the creator: a deployer may not create tokens, a tenant's admin only for its tenant", async () => {
    const deployer = new ApiClient(alpha.url, teamDeployerToken);
    await assert.rejects(create(deployer, { name: "from-deployer" }), (e: Error & { code?: number }) => {
      assert.match(e.message, /team-a-deployer may not token_admin in tenant team-a.*needs the token_admin permission/);
      return true;
    });
    const r = await fetch(new URL("/api/v1/tokens", alpha.url), {
      method: "POST",
      headers: { authorization: `Bearer ${teamDeployerToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "from-deployer", role: "viewer", tenant: "team-a", expires_in: "1d" }),
    });
    assert.equal(r.status, 403);
    await assert.rejects(deployer.tokens({}), /needs the token_admin permission/);

    // A managed deployer token may not either.
    const ciDeployer = await create(alpha.api, { name: "ci-deployer" });
    secrets.push(ciDeployer.token);
    await assert.rejects(create(new ApiClient(beta.url, ciDeployer.token), { name: "from-managed" }), /needs the token_admin permission/);

    const teamAdmin = new ApiClient(alpha.url, teamAdminToken);
    const mine = await create(teamAdmin, { name: "team-a-viewer", role: "viewer", environment: "prod*" });
    secrets.push(mine.token);
    assert.equal(mine.created_by, "team-a-admin");
    for (const tenant of ["team-b", "*", "team-*"])
      await assert.rejects(create(teamAdmin, { name: `wider-${tenant.replace("*", "x")}`, tenant }), /needs the token_admin permission/);
    const other = await create(alpha.api, { name: "team-b-ci", tenant: "team-b" });
    secrets.push(other.token);
    // The tenant's admin sees its tenant's tokens only, and another tenant's token is not found.
    const names = (await teamAdmin.tokens({})).tokens.map((t) => t.name);
    assert.ok(names.includes("team-a-viewer") && !names.includes("team-b-ci"), names.join());
    await assert.rejects(teamAdmin.revokeToken(other.id), /no API token/);
    await assert.rejects(deployer.revokeToken(mine.id), /needs the token_admin permission/);
    assert.equal((await teamAdmin.revokeToken(mine.id)).status, "revoked");
  });

  it("a name is one token's: not a manent.yml token's, not taken twice, not reused once revoked", async () => {
    await assert.rejects(create(alpha.api, { name: "team-a-deployer" }), /manent.yml has a token named team-a-deployer/);
    const t = await create(alpha.api, { name: "once" });
    secrets.push(t.token);
    await assert.rejects(create(beta.api, { name: "once" }), /a token named once exists/);
    await alpha.api.revokeToken(t.id);
    await assert.rejects(create(beta.api, { name: "once" }), /a token named once exists/);
    // Bad input names the field and changes nothing.
    for (const [body, field] of [
      [{ name: "Bad Name" }, /name/],
      [{ name: "x", role: "owner" }, /role/],
      [{ name: "x", tenant: "team a" }, /tenant/],
      [{ name: "x", expires_in: "367d" }, /expires_in: at most 366d/],
      [{ name: "x", expires_in: "never" }, /expires_in/],
      [{ name: "x", secret: "mine" }, /secret/],
    ] as const)
      await assert.rejects(create(alpha.api, body), (e: Error) => field.test(e.message) && /request body/.test(e.message));
    assert.ok(!(await alpha.api.tokens({})).tokens.some((x) => x.name === "x"));
    const cli = await runCli(["token", "create", "--role", "viewer", "--tenant", "team-a", "--expires", "forever", "--name", "y"], {
      cwd: ws.dir,
      server: alpha.url,
      token: rootToken,
    });
    assert.equal(cli.code, 2);
    assert.match(cli.stderr, /--expires: "forever" must be a number and a unit/);
  });

  it("a server whose manent.yml names a token like a managed one refuses the managed one instead of merging them", async () => {
    const managed = await create(alpha.api, { name: "shared-name" });
    secrets.push(managed.token);
    const config = await ws.write(
      "gamma.yml",
      manentYml(undefined, {
        dbos: { database_url: databaseUrl, executor_id: "gamma" },
        workdir: "./work-gamma",
        auth: { tokens: [{ name: "shared-name", tenant: "team-b", role: "viewer", sha256: sha("gamma-static-token-0123") }] },
      }),
    );
    const gamma = await startServer(config, { cwd: ws.dir });
    try {
      const refused = await call(gamma.url, managed.token);
      assert.equal(refused.status, 401);
      assert.match(refused.error!.message, /API token shared-name: manent.yml has a token of the same name/);
      assert.equal((await call(gamma.url, "gamma-static-token-0123")).status, 200, "the manent.yml token is itself");
      assert.equal((await call(alpha.url, managed.token)).status, 200, "servers without the name still take it");
    } finally {
      await gamma.stop();
    }
  });

  it("audits creation, revocation and refused tries, naming the token and never its value", async () => {
    const { entries } = await alpha.api.audit({ limit: "200" });
    const of = (action: string, outcome: string) => entries.filter((e) => e.action === action && e.outcome === outcome);
    const created = of("token_create", "ok").find((e) => e.message?.includes("token ci-team-a"));
    assert.equal(created?.actor, "root");
    assert.equal(created?.tenant, "team-a");
    assert.equal(created?.deploy_id, null);
    assert.ok(of("token_revoke", "ok").some((e) => e.message?.includes("token ci-team-a")));
    assert.ok(of("token_create", "permission_denied").some((e) => e.actor === "team-a-deployer"));
    assert.ok(of("token_revoke", "failed_precondition").some((e) => /already revoked/.test(e.message ?? "")));
    assert.ok(of("sign_in", "unauthenticated").some((e) => /API token ci-team-a was revoked/.test(e.message ?? "")));
    assert.ok(secrets.length >= 5);
    const text = JSON.stringify(entries) + JSON.stringify((await beta.api.audit({ limit: "200" })).entries);
    for (const s of secrets) assert.ok(!text.includes(s) && !text.includes(s.slice(4)), "a token's value in the audit log");
  });

  it("keeps only the sha256 of a value: not in the database, not in the logs", async () => {
    const db = new pg.Client(databaseUrl);
    await db.connect();
    let dump = "";
    try {
      const tables = await db.query<{ schema: string; name: string }>(
        `select table_schema as schema, table_name as name from information_schema.tables
         where table_schema not in ('pg_catalog', 'information_schema') and table_type = 'BASE TABLE'`,
      );
      assert.ok(tables.rows.some((t) => t.schema === "manent" && t.name === "api_tokens"));
      for (const t of tables.rows) {
        const rows = await db.query<{ row: string }>(`select to_jsonb(x)::text as row from "${t.schema}"."${t.name}" x`);
        dump += rows.rows.map((r) => r.row).join("\n");
      }
      const stored = await db.query<{ hex: string }>(`select encode(secret_sha256, 'hex') as hex from manent.api_tokens`);
      for (const s of secrets)
        assert.ok(
          stored.rows.some((r) => r.hex === sha(s)),
          "each token's sha256 is stored",
        );
    } finally {
      await db.end();
    }
    const logs = alpha.logs() + beta.logs();
    for (const s of secrets) {
      assert.ok(!dump.includes(s) && !dump.includes(s.slice(4)), "a token's value in the database");
      assert.ok(!logs.includes(s.slice(4)), "a token's value in a server's log");
    }
    assert.doesNotMatch(dump + logs, tokenPattern);
  });
});
