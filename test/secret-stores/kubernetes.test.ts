import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { databaseText } from "../support/database-text.js";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * k8s: references against a real Kubernetes control plane (test/support/kube): manent reads a
 * Secret's key through the API server with a service account token allowed to get Secrets in one
 * namespace, at the step that needs it. A missing Secret or key and an RBAC refusal fail at once,
 * the API server down fails as unavailable (retried), each naming the reference; a tenant cannot
 * name a namespace not given to it; no value reaches a log, an output or the database.
 */
describe("k8s: secret references", () => {
  const password = `k8s-db-${randomBytes(10).toString("hex")}`;
  const locked = `k8s-locked-${randomBytes(16).toString("hex")}`;
  let cp: KubeControlPlane;
  let db: TestPostgres;
  let dbUrl: string;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const envconfig = (tenant: string, app: string, ref: string, extra: Record<string, unknown> = {}) =>
    ws.write(`envconfig/${tenant}/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { read_secret: "db", state_dir: ws.path("state", app) },
      secrets: [{ name: "db", ref }],
      max_retries: 5,
      retry_interval: "10ms",
      ...extra,
    });
  const deploy = async (tenant: string, app: string) =>
    server.api.deploy(
      (await server.api.submit({ descriptor: { ...descriptor(app, "prod", artifact), tenant }, descriptor_file: `${app}.yml` })).id,
      60,
    );

  before(async () => {
    [cp, db, ws] = await Promise.all([KubeControlPlane.start(), TestPostgres.start(), createWorkspace()]);
    dbUrl = await db.createDatabase();
    artifact = await ws.write("dist/app.txt", "x\n");
    // manent's account may get Secrets in team-a-secrets only; "locked" is a namespace the tenant may name but RBAC refuses.
    const access = await cp.serviceAccount("team-a-secrets", "manent", [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }]);
    await cp.namespace("locked");
    await cp.admin.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "db", namespace: "team-a-secrets" },
      data: { password: Buffer.from(password).toString("base64") },
    });
    await cp.admin.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "db", namespace: "locked" },
      stringData: { password: locked },
    });
    const yml = await ws.write("manent.yml", {
      ...manentYml(dbUrl),
      secret_stores: {
        kubernetes: {
          server: cp.url,
          ca_file: await ws.write("kube/ca.crt", access.caPem),
          token: `file:${await ws.write("kube/token", access.token)}`,
          tenants: { "team-a": ["team-a-secrets", "locked"] },
        },
      },
    });
    server = await startServer(yml, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await Promise.all([cp?.stop(), db?.stop()]);
  });

  it("reads a Secret's key through the API server at the step that needs it", async () => {
    await envconfig("team-a", "shop", "k8s:team-a-secrets/db#password");
    const d = await deploy("team-a", "shop");
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const out = d.steps.find((s) => s.name === "deploy")!.output as { result: string };
    const result = JSON.parse(out.result) as { targets: { details: Record<string, string> }[] };
    assert.equal(result.targets[0]!.details.secret_length, String(password.length), "the plugin read the Secret's value");
    const reads = (await cp.auditedRequests()).filter((r) => r.user === "system:serviceaccount:team-a-secrets:manent");
    assert.deepEqual(
      reads.map((r) => `${r.verb} ${r.requestURI} ${r.code}`),
      ["get /api/v1/namespaces/team-a-secrets/secrets/db 200"],
      "one get with manent's service account, when the plugin asked",
    );
  });

  it("fails at once, naming the reference, when the Secret or key is missing or RBAC refuses it", async () => {
    for (const [app, ref, code, reason] of [
      ["nokey", "k8s:team-a-secrets/db#nope", "failed_precondition", /Secret team-a-secrets\/db has no key "nope"/],
      [
        "nosecret",
        "k8s:team-a-secrets/gone#password",
        "failed_precondition",
        /there is no Secret gone in namespace team-a-secrets \(404\)/,
      ],
      ["denied", "k8s:locked/db#password", "permission_denied", /the API server refused to read Secret locked\/db \(403/],
    ] as const) {
      await envconfig("team-a", app, ref);
      const d = await deploy("team-a", app);
      assert.equal(d.status, "failed", app);
      assert.equal(d.error?.code, code, `${app}: ${d.error?.message}`);
      assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, `${app}: permanent, not retried`);
      assert.ok(d.error!.message.includes(`secret "db": ${ref}: `), d.error!.message);
      assert.match(d.error!.message, reason);
    }
  });

  it("refuses at submission a namespace not given to the tenant, naming file, field and reason", async () => {
    await envconfig("team-b", "thief", "k8s:team-a-secrets/db#password");
    await ws.write("thief.yml", { ...descriptor("thief", "prod", artifact), tenant: "team-b" });
    const cli = await runCli(["deploy", "-f", "thief.yml"], { cwd: ws.dir, server: server.url });
    assert.notEqual(cli.code, 0);
    assert.ok(
      cli.stderr.includes(
        `./envconfig/team-b/thief/thief/prod.yml: secrets.0.ref: secret "db": k8s:team-a-secrets/db#password: tenant team-b may reference no Kubernetes namespace`,
      ),
      cli.stderr,
    );
    const audited = (await cp.auditedRequests()).filter((r) => r.requestURI.includes("/secrets/") && r.user.includes("manent"));
    assert.equal(audited.length, 4, "the refused deploy asked the API server nothing");
  });

  it("never puts a value in the server's log, the CLI's output or the database", async () => {
    const history = await runCli(["history", "-o", "json"], { cwd: ws.dir, server: server.url });
    const rows = await databaseText(dbUrl);
    assert.ok(rows.includes("k8s:team-a-secrets/db#password"), "the reference is recorded, as it should be");
    for (const [where, text] of [
      ["server log", server.logs()],
      ["CLI output", history.stdout + history.stderr],
      ["database", rows],
    ] as const) {
      assert.equal(text.includes(password), false, `the Secret's value leaked into the ${where}`);
      assert.equal(text.includes(locked), false, `the locked Secret's value leaked into the ${where}`);
    }
  });

  it("fails as unavailable, retried, while the API server is down, naming the reference", async () => {
    await envconfig("team-a", "outage", "k8s:team-a-secrets/db#password", { max_retries: 2 });
    await cp.stop();
    const d = await deploy("team-a", "outage");
    assert.equal(d.status, "failed");
    assert.equal(d.error?.code, "unavailable", d.error?.message);
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3, "retried as max_retries allows");
    assert.match(
      d.error!.message,
      /secret "db": k8s:team-a-secrets\/db#password: the Kubernetes API server at https:\/\/127\.0\.0\.1:\d+ cannot be reached: ECONNREFUSED/,
    );
  });
});
