import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { collect } from "../support/event-stream.js";
import { runCli, type ServerProcess } from "../support/server-process.js";
import { TokenServer } from "../support/token-server.js";
import { descriptor, type Workspace } from "../support/workspace.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const tokens = {
  admin: "rbac-admin-token-000001",
  viewer: "rbac-viewer-token-00002",
  devDeployer: "rbac-dev-deployer-0003",
  prodApprover: "rbac-prod-approver-004",
  teamB: "rbac-team-b-token-00005",
};

/**
 * Roles and permissions on a real server: each token a role over tenant, application and
 * environment patterns; refusals are 403 naming the permission, what a caller may not read is 404,
 * lists and event streams show only what it may read, and `manent auth can-i` answers with its reason.
 */
describe("roles and permissions", () => {
  const fx = new TokenServer();
  const { api, request } = fx;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  const shop = (environment: string, version = "1.0.0") => ({ ...descriptor("shop", environment, artifact, version), tenant: "team-a" });
  let devDeploy = "";
  let prodDeploy = "";
  let bankDeploy = "";

  before(async () => {
    ({ ws, server, artifact } = await fx.startWithTokens("rbac\n", [
      { name: "root", tenant: "*", token: tokens.admin },
      { name: "looker", tenant: "team-a", role: "viewer", token: tokens.viewer },
      { name: "dev-ci", tenant: "team-a", role: "deployer", environment: "dev*", token: tokens.devDeployer },
      { name: "release", tenant: "team-*", role: "approver", environment: "prod*", token: tokens.prodApprover },
      { name: "bank-ci", tenant: "team-b", role: "deployer", token: tokens.teamB },
    ]));
    for (const [tenant, app, env] of [
      ["team-a", "shop", "dev"],
      ["team-a", "shop", "dev-2"],
      ["team-a", "shop", "prod"],
      ["team-b", "bank", "dev"],
    ] as const) {
      await ws.write(`envconfig/${tenant}/${app}/${app}/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-${env}` }],
        params: { state_dir: ws.path("state") },
      });
    }
    prodDeploy = (await api(tokens.admin).submit({ descriptor: shop("prod"), descriptor_file: "shop.yml" })).id;
    assert.equal((await api(tokens.admin).deploy(prodDeploy, 60)).status, "succeeded");
    bankDeploy = (
      await api(tokens.teamB).submit({ descriptor: { ...descriptor("bank", "dev", artifact), tenant: "team-b" }, descriptor_file: "b.yml" })
    ).id;
    assert.equal((await api(tokens.teamB).deploy(bankDeploy, 60)).status, "succeeded");
  });
  after(() => fx.stop());

  it("refuses a viewer every change with 403 naming the permission, and lets it read", async () => {
    for (const [path, body, action] of [
      ["/api/v1/deploys", { descriptor: shop("dev") }, "submit"],
      ["/api/v1/deploys", { descriptor: shop("dev"), dry_run: true }, "dry_run"],
      ["/api/v1/rollbacks", { descriptor: shop("prod") }, "rollback"],
      [`/api/v1/deploys/${prodDeploy}/cancel`, undefined, "cancel"],
      [`/api/v1/deploys/${prodDeploy}/approve`, undefined, "approve"],
      [`/api/v1/deploys/${prodDeploy}/abort`, undefined, "abort"],
    ] as const) {
      const r = await request(tokens.viewer, "POST", path, body);
      assert.equal(r.status, 403, `${action}: ${r.text}`);
      assert.equal(r.error?.code, "permission_denied");
      assert.match(r.error!.message, new RegExp(`^looker may not ${action} in tenant team-a.*: needs the ${action} permission \\(role `));
    }
    assert.equal((await api(tokens.viewer).deploy(prodDeploy)).id, prodDeploy);
    const audit = await request(tokens.viewer, "GET", "/api/v1/audit");
    assert.equal(audit.status, 403, audit.text);
    assert.match(audit.error!.message, /needs the audit_read permission \(role admin\)/);
    const upload = await request(tokens.viewer, "GET", `/api/v1/uploads/${"a".repeat(64)}?tenant=team-a`);
    assert.equal(upload.status, 404, "a viewer may ask whether an upload is there");
    const put = await fetch(new URL(`/api/v1/uploads/${sha("x")}?tenant=team-a`, server.url), {
      method: "PUT",
      headers: { authorization: `Bearer ${tokens.viewer}`, "content-type": "application/octet-stream" },
      body: "x",
    });
    assert.equal(put.status, 403);
    assert.match(await put.text(), /needs the submit or dry_run permission somewhere in it/);
  });

  it("lets a deployer scoped to dev* deploy in dev and refuses it in prod, which it cannot even see", async () => {
    const dev = api(tokens.devDeployer);
    devDeploy = (await dev.submit({ descriptor: shop("dev"), descriptor_file: "shop.yml" })).id;
    assert.equal((await dev.deploy(devDeploy, 60)).status, "succeeded");
    const refused = await request(tokens.devDeployer, "POST", "/api/v1/deploys", { descriptor: shop("prod") });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(
      refused.error!.message,
      "dev-ci may not submit in tenant team-a, application shop, environment prod: needs the submit permission (role deployer or admin); " +
        "its role deployer has it only in tenant team-a, application *, environment dev*",
    );
    // The prod deploy is not its business: 404 on read and on every action, not 403.
    for (const [method, path] of [
      ["GET", `/api/v1/deploys/${prodDeploy}`],
      ["POST", `/api/v1/deploys/${prodDeploy}/cancel`],
      ["POST", `/api/v1/deploys/${prodDeploy}/abort`],
      ["GET", `/api/v1/deploys/${prodDeploy}/events`],
    ] as const) {
      const r = await request(tokens.devDeployer, method, path, method === "POST" ? {} : undefined);
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
    }
    // A deployer may not approve, even where it deploys: 403 naming approve.
    const approve = await request(tokens.devDeployer, "POST", `/api/v1/deploys/${devDeploy}/approve`, {});
    assert.equal(approve.status, 403, approve.text);
    assert.match(approve.error!.message, /needs the approve permission \(role approver or admin\)/);
  });

  it("lets an approver over prod* approve there (past the permission check) but not see dev", async () => {
    const r = await request(tokens.prodApprover, "POST", `/api/v1/deploys/${prodDeploy}/approve`, {});
    // Allowed: what stops it is the deploy itself (it has no approval step waiting), not the permission.
    assert.equal(r.status, 412, r.text);
    assert.equal(r.error?.code, "failed_precondition");
    assert.equal((await request(tokens.prodApprover, "GET", `/api/v1/deploys/${devDeploy}`)).status, 404);
    assert.equal((await request(tokens.prodApprover, "POST", "/api/v1/deploys", { descriptor: shop("prod") })).status, 403);
  });

  it("hides another tenant's deploys (404) and filters lists in the query, so limits count what is shown", async () => {
    assert.equal((await request(tokens.teamB, "GET", `/api/v1/deploys/${devDeploy}`)).status, 404);
    assert.equal((await request(tokens.devDeployer, "GET", `/api/v1/deploys/${bankDeploy}`)).status, 404);
    const ids = async (token: string, query: Record<string, string> = {}) => (await api(token).list(query)).deploys.map((d) => d.id);
    assert.deepEqual(await ids(tokens.devDeployer), [devDeploy]);
    // The newest deploy overall is not its own: a limit of one still finds its own.
    const newest = (await api(tokens.admin).submit({ descriptor: shop("prod", "1.0.1"), descriptor_file: "shop.yml" })).id;
    assert.equal((await api(tokens.admin).deploy(newest, 60)).status, "succeeded");
    assert.deepEqual(await ids(tokens.devDeployer, { limit: "1" }), [devDeploy]);
    assert.deepEqual(await ids(tokens.prodApprover), [newest, prodDeploy]);
    assert.deepEqual(await ids(tokens.teamB), [bankDeploy]);
    assert.deepEqual(new Set(await ids(tokens.viewer)), new Set([newest, devDeploy, prodDeploy]));
    assert.deepEqual(new Set(await ids(tokens.admin)), new Set([newest, devDeploy, prodDeploy, bankDeploy]));
  });

  it("streams only the events of deploys the caller may read", async () => {
    const stream = collect(server.url, tokens.devDeployer, "/api/v1/events", { after: 0 });
    try {
      await stream.opened;
      // The marker is the newest deploy: once its end arrives, every earlier event has been through the filter.
      const marker = (await api(tokens.devDeployer).submit({ descriptor: shop("dev-2"), descriptor_file: "shop.yml" })).id;
      await stream.waitFor((e) => e.deploy_id === marker && e.type === "deploy.status" && e.data.status === "succeeded");
      const seen = new Set(stream.events.map((e) => e.deploy_id));
      assert.deepEqual(seen, new Set([devDeploy, marker]));
    } finally {
      await stream.stop();
    }
  });

  it("tells who the caller is, and answers can-i with the grant or the missing permission (CLI exit 0 yes, 1 no)", async () => {
    const me = await api(tokens.devDeployer).whoami();
    assert.deepEqual(me, {
      kind: "token",
      id: "token:dev-ci",
      name: "dev-ci",
      groups: [],
      grants: [{ role: "deployer", scope: { tenant: "team-a", application: "*", environment: "dev*" } }],
    });
    const yes = await runCli(
      ["auth", "can-i", "submit", "--tenant", "team-a", "--application", "shop", "--environment", "dev-7", "-o", "text"],
      {
        cwd: ws.dir,
        server: server.url,
        token: tokens.devDeployer,
      },
    );
    assert.equal(yes.code, 0, yes.stderr);
    assert.equal(yes.stdout, "yes: allowed by role deployer in tenant team-a, application *, environment dev*\n");
    const no = await runCli(
      ["auth", "can-i", "submit", "--tenant", "team-a", "--application", "shop", "--environment", "prod", "-o", "text"],
      {
        cwd: ws.dir,
        server: server.url,
        token: tokens.devDeployer,
      },
    );
    assert.equal(no.code, 1, no.stderr);
    // It has the role: the scope is what is missing, and the answer names the role and where it applies.
    assert.equal(
      no.stdout,
      "no: dev-ci may not submit in tenant team-a, application shop, environment prod: needs the submit permission (role deployer or admin); " +
        "its role deployer has it only in tenant team-a, application *, environment dev*\n",
    );
    // Without an environment, the question is "anywhere in team-a": a grant over dev* does not answer it.
    const anywhere = await api(tokens.devDeployer).canI({ action: "submit", tenant: "team-a" });
    assert.equal(anywhere.allowed, false);
    const approve = await api(tokens.prodApprover).canI({
      action: "approve",
      tenant: "team-a",
      application: "shop",
      environment: "prod-eu",
    });
    assert.deepEqual(approve.grant, { role: "approver", scope: { tenant: "team-*", application: "*", environment: "prod*" } });
    const badAction = await runCli(["auth", "can-i", "fly", "--tenant", "team-a"], {
      cwd: ws.dir,
      server: server.url,
      token: tokens.viewer,
    });
    assert.equal(badAction.code, 2);
    assert.match(badAction.stderr, /fly/);
    const badTenant = await request(tokens.viewer, "GET", "/api/v1/auth/can-i?action=read&tenant=Team%20A");
    assert.equal(badTenant.status, 400, badTenant.text);
    assert.match(badTenant.error!.message, /tenant/);
    const whoami = await runCli(["auth", "whoami", "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.prodApprover });
    assert.equal(whoami.code, 0, whoami.stderr);
    assert.equal(whoami.stdout, "release (token:release)\napprover\ttenant team-*\tapplication *\tenvironment prod*\n");
  });

  it("tells a deployer deploying into another tenant that its token may not act there (exit 3), naming where its grants are", async () => {
    await ws.write("untenanted.yml", descriptor("shop", "dev", "dist/app.txt"));
    const r = await runCli(["deploy", "-f", "untenanted.yml"], { cwd: ws.dir, server: server.url, token: tokens.devDeployer });
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /dev-ci may not upload artifacts to tenant untenanted: .*; its grants are in tenant team-a/);
    assert.doesNotMatch(r.stderr, /no tenant/);
  });

  it("lets only an admin of every tenant sweep the history (retention_sweep)", async () => {
    for (const [token, name] of [
      [tokens.viewer, "looker"],
      [tokens.teamB, "bank-ci"],
      [tokens.prodApprover, "release"],
    ] as const) {
      const r = await request(token, "POST", "/api/v1/retention/sweep");
      assert.equal(r.status, 403, `${name}: ${r.text}`);
      assert.match(
        r.error!.message,
        new RegExp(`^${name} may not retention_sweep .*needs the retention_sweep permission \\(role admin\\)`),
      );
    }
    // The admin of every tenant may; this server has no policy, which the answer says.
    const root = await request(tokens.admin, "POST", "/api/v1/retention/sweep");
    assert.equal(root.status, 412, root.text);
    assert.match(root.error!.message, /no retention policy is configured \(retention in manent\.yml\): everything is kept/);
  });

  it("records each action's principal and where in the audit log", async () => {
    const { entries } = await api(tokens.admin).audit({ action: "submit", outcome: "permission_denied" });
    const refused = entries.find((e) => e.actor_id === "token:dev-ci");
    assert.ok(refused, JSON.stringify(entries, null, 2));
    assert.deepEqual(
      [refused.actor, refused.actor_kind, refused.tenant, refused.application, refused.environment],
      ["dev-ci", "token", "team-a", "shop", "prod"],
    );
    const byId = await api(tokens.admin).audit({ actor_id: "token:looker" });
    assert.ok(byId.entries.length >= 6 && byId.entries.every((e) => e.actor === "looker"));
  });
});
