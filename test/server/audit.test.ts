import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ApiClient, type AuditEntry } from "../../src/cli/api-client.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const adminToken = "audit-admin-token-0123";
const teamToken = "audit-team-a-token-4567";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** The audit log: what changed, by whom, from where, with what outcome; append-only; tenant-scoped. */
describe("audit log", () => {
  let testPg: TestPostgres;
  let databaseUrl: string;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  let admin: ApiClient;
  let team: ApiClient;

  const tenantDescriptor = (tenant: string, app: string, version: string) => ({ ...descriptor(app, "test", artifact, version), tenant });
  const entries = async (client: ApiClient, query: Record<string, string> = {}) => (await client.audit(query)).entries;

  before(async () => {
    testPg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "audit\n");
    databaseUrl = await testPg.createDatabase();
    const config = await ws.write(
      "manent.yml",
      manentYml(databaseUrl, {
        auth: {
          tokens: [
            { name: "release-bot", tenant: "*", sha256: sha(adminToken) },
            { name: "team-a-ci", tenant: "team-a", sha256: sha(teamToken) },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
    admin = new ApiClient(server.url, adminToken);
    team = new ApiClient(server.url, teamToken);
    for (const [tenant, app, delay] of [
      ["team-a", "shop", "0ms"],
      ["team-b", "bank", "0ms"],
      ["team-a", "slow", "2s"],
    ] as const) {
      await ws.write(`envconfig/${tenant}/${app}/${app}/test.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay },
      });
    }
  });
  after(async () => {
    await server?.stop();
    await testPg?.stop();
  });

  it("records submit, rollback, cancel and refused actions with who, tenant, deploy, outcome and client address", async () => {
    const v1 = await team.submit({ descriptor: tenantDescriptor("team-a", "shop", "1.0.0"), descriptor_file: "shop.yml" });
    assert.equal((await team.deploy(v1.id, 60)).status, "succeeded");
    const v2 = await team.submit({ descriptor: tenantDescriptor("team-a", "shop", "2.0.0"), descriptor_file: "shop.yml" });
    assert.equal((await team.deploy(v2.id, 60)).status, "succeeded");
    const back = await team.rollback({ descriptor: tenantDescriptor("team-a", "shop", "2.0.0"), descriptor_file: "shop.yml" });
    assert.equal((await team.deploy(back.id, 60)).status, "succeeded");
    await assert.rejects(
      team.submit({ descriptor: tenantDescriptor("team-b", "bank", "1.0.0") }),
      /team-a-ci may not submit in tenant team-b, application bank, environment test: needs the submit permission/,
    );
    const slow = await admin.submit({ descriptor: tenantDescriptor("team-a", "slow", "1.0.0"), descriptor_file: "slow.yml" });
    await admin.cancel(slow.id);
    // Taken at once if the deploy had not started, else by the running deploy: either way it ends.
    let ended = await admin.deploy(slow.id, 60);
    while (!["cancelled", "rolled_back", "failed", "succeeded"].includes(ended.status)) ended = await admin.deploy(slow.id, 60);
    await assert.rejects(admin.cancel(slow.id), /already ended/);

    const log = await entries(admin, { limit: "50" });
    const find = (action: string, deploy: string | null, outcome = "ok") =>
      log.find((e) => e.action === action && e.deploy_id === deploy && e.outcome === outcome);
    const submitted = find("submit", v1.id);
    assert.ok(submitted, JSON.stringify(log, null, 2));
    // The principal: a token's kind, unique id and name (no e-mail, no groups).
    assert.deepEqual(
      [submitted.actor, submitted.actor_kind, submitted.actor_id, submitted.actor_email, submitted.actor_groups],
      ["team-a-ci", "token", "token:team-a-ci", null, []],
    );
    assert.deepEqual([submitted.tenant, submitted.application, submitted.environment], ["team-a", "shop", "test"]);
    assert.equal(submitted.client_address, "127.0.0.1");
    assert.ok(Date.parse(submitted.at) > 0);
    assert.equal(find("rollback", back.id)?.actor, "team-a-ci");
    assert.equal(find("cancel", slow.id)?.actor, "release-bot");
    const cancelAgain = find("cancel", slow.id, "failed_precondition");
    assert.match(cancelAgain?.message ?? "", /already ended/);
    const denied = log.find((e) => e.action === "submit" && e.outcome === "permission_denied");
    assert.deepEqual(
      [denied?.actor, denied?.actor_id, denied?.tenant, denied?.application, denied?.deploy_id],
      ["team-a-ci", "token:team-a-ci", "team-b", "bank", null],
    );
    // The deploy records its submitter's name and principal id (separation of duties compares the id).
    const record = await admin.deploy(v1.id);
    assert.deepEqual([record.submitted_by, record.submitted_by_id], ["team-a-ci", "token:team-a-ci"]);
    // Newest first.
    assert.deepEqual(
      log.map((e) => e.id),
      [...log.map((e) => e.id)].sort((a, b) => b - a),
    );
  });

  it("records refused sign-ins, without the token", async () => {
    const wrong = "not-a-token-but-a-guess";
    assert.equal((await fetch(new URL("/api/v1/deploys", server.url), { headers: { authorization: `Bearer ${wrong}` } })).status, 401);
    const log = await entries(admin, { action: "sign_in" });
    const e = log[0];
    assert.ok(e, "no sign_in entry");
    assert.deepEqual(
      [e.actor, e.actor_kind, e.actor_id, e.tenant, e.outcome, e.client_address],
      [null, null, null, null, "unauthenticated", "127.0.0.1"],
    );
    assert.match(e.message ?? "", /unknown API token/);
    assert.ok(!JSON.stringify(log).includes(wrong), "the token appears in the audit log");
  });

  it("a client guessing tokens gets a few entries a minute, not one per guess", async () => {
    const before = (await entries(admin, { action: "sign_in" })).length;
    for (let i = 0; i < 25; i++) {
      const res = await fetch(new URL("/api/v1/deploys", server.url), { headers: { authorization: `Bearer guess-${i}` } });
      assert.equal(res.status, 401, "every guess is still refused");
    }
    const after = (await entries(admin, { action: "sign_in" })).length;
    // This file's earlier refusal counts in the same minute: at most 10 entries from one address.
    assert.ok(after - before <= 10 && after - before >= 9, `${after - before} entries for 25 refusals`);
  });

  it("shows a tenant's token only its tenant's entries, and filters", async () => {
    const mine = await entries(team);
    assert.ok(mine.length > 0);
    assert.deepEqual([...new Set(mine.map((e) => e.tenant))], ["team-a"]);
    // Asking for another tenant's entries finds none: the filter narrows what the token may read, never widens it.
    assert.deepEqual(await entries(team, { tenant: "team-b" }), []);
    const rollbacks = await entries(admin, { action: "rollback" });
    assert.ok(rollbacks.length > 0 && rollbacks.every((e) => e.action === "rollback"));
    const bank = await entries(admin, { tenant: "team-b" });
    assert.ok(bank.length > 0 && bank.every((e) => e.tenant === "team-b"));
    const page = await entries(admin, { limit: "2" });
    const older = await entries(admin, { limit: "2", before: String(page[1]!.id) });
    assert.ok(older.every((e) => e.id < page[1]!.id));
  });

  it("cannot be changed: no route edits it, and the database refuses UPDATE, DELETE and TRUNCATE", async () => {
    for (const method of ["DELETE", "PUT", "PATCH", "POST"]) {
      const r = await fetch(new URL("/api/v1/audit", server.url), { method, headers: { authorization: `Bearer ${adminToken}` } });
      assert.equal(r.status, 404, method);
    }
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const before = (await client.query("select count(*)::int as n from manent.audit")).rows[0].n as number;
      for (const sql of ["update manent.audit set outcome = 'ok'", "delete from manent.audit", "truncate manent.audit"]) {
        await assert.rejects(client.query(sql), /append-only/, sql);
      }
      assert.equal((await client.query("select count(*)::int as n from manent.audit")).rows[0].n, before);
    } finally {
      await client.end();
    }
  });

  it("is listed by `manent audit` with filters", async () => {
    const r = await runCli(["audit", "--action", "submit", "--outcome", "ok", "-o", "json"], {
      cwd: ws.dir,
      server: server.url,
      token: teamToken,
    });
    assert.equal(r.code, 0, r.stderr);
    const list = JSON.parse(r.stdout) as AuditEntry[];
    assert.ok(list.length >= 2);
    assert.ok(list.every((e) => e.action === "submit" && e.outcome === "ok" && e.tenant === "team-a"));
    const text = await runCli(["audit", "--limit", "3", "-o", "text"], { cwd: ws.dir, server: server.url, token: adminToken });
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trim().split("\n");
    assert.match(lines[0]!, /^AT\tACTOR\tTENANT\tACTION\tDEPLOY\tOUTCOME\tCLIENT\tMESSAGE$/);
    assert.equal(lines.length, 4);
  });
});
