import assert from "node:assert/strict";
import { get as httpGet } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { readJournal, type JournalEntry } from "../support/journal.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const adminToken = "admin-token-0123456789";
const teamToken = "team-a-token-9876543210";

/** The HTTP API of a real manent-server: tokens and tenants, health, metrics, limits, cancellation. */
describe("HTTP API", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  let admin: ApiClient;
  let team: ApiClient;

  const envconfig = (tenant: string, app: string, env: string, body: Record<string, unknown>) =>
    ws.write(`envconfig/${tenant}/${app}/${app}/${env}.yml`, body);
  const params = (extra: Record<string, string> = {}) => ({ state_dir: ws.path("state"), journal: ws.path("journal"), ...extra });
  const request = async (method: string, path: string, opts: { token?: string; body?: string } = {}) => {
    const res = await fetch(new URL(path, server.url), {
      method,
      headers: {
        ...(opts.token && { authorization: `Bearer ${opts.token}` }),
        ...(opts.body !== undefined && { "content-type": "application/json" }),
      },
      ...(opts.body !== undefined && { body: opts.body }),
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) as { error?: { code: string; message: string } } };
  };
  const tenantDescriptor = (tenant: string, app: string, version = "1.0.0") => ({ ...descriptor(app, "test", artifact, version), tenant });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "hello\n");
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          tokens: [
            { name: "ci", tenant: "*", token: "env:MANENT_TEST_ADMIN_TOKEN" },
            { name: "team-a", tenant: "team-a", sha256: createHash("sha256").update(teamToken).digest("hex") },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { MANENT_TEST_ADMIN_TOKEN: adminToken } });
    admin = new ApiClient(server.url, adminToken);
    team = new ApiClient(server.url, teamToken);
    await envconfig("team-a", "shop", "test", { plugin: "noop", targets: [{ host: "shop-1" }], params: params() });
    await envconfig("team-b", "bank", "test", { plugin: "noop", targets: [{ host: "bank-1" }], params: params() });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("refuses a request without a token or with an unknown one (401 unauthenticated)", async () => {
    for (const token of [undefined, "not-a-token"]) {
      for (const [method, path] of [
        ["GET", "/api/v1/deploys"],
        ["GET", "/api/v1/plugins"],
        ["POST", "/api/v1/deploys"],
      ] as const) {
        const r = await request(method, path, { ...(token && { token }), ...(method === "POST" && { body: "{}" }) });
        assert.equal(r.status, 401, `${method} ${path} with ${token ?? "no token"}: ${r.text}`);
        assert.equal(r.json().error?.code, "unauthenticated");
      }
    }
    assert.match((await request("GET", "/api/v1/deploys")).json().error!.message, /missing bearer token/);
    assert.match((await request("GET", "/api/v1/deploys", { token: "nope" })).json().error!.message, /unknown API token/);
  });

  it("lets a tenant's token act on its tenant only, and hides other tenants' deploys", async () => {
    const mine = await team.submit({ descriptor: tenantDescriptor("team-a", "shop"), descriptor_file: "shop.yml" });
    assert.equal((await team.deploy(mine.id, 60)).status, "succeeded");

    const denied = await request("POST", "/api/v1/deploys", {
      token: teamToken,
      body: JSON.stringify({ descriptor: tenantDescriptor("team-b", "bank") }),
    });
    assert.equal(denied.status, 403, denied.text);
    assert.equal(denied.json().error?.code, "permission_denied");
    const deniedRollback = await request("POST", "/api/v1/rollbacks", {
      token: teamToken,
      body: JSON.stringify({ descriptor: tenantDescriptor("team-b", "bank") }),
    });
    assert.equal(deniedRollback.status, 403, deniedRollback.text);

    const theirs = await admin.submit({ descriptor: tenantDescriptor("team-b", "bank"), descriptor_file: "bank.yml" });
    assert.equal((await admin.deploy(theirs.id, 60)).status, "succeeded");

    // The tenant token lists its own deploys only; asking for another tenant's finds none.
    const { deploys } = await team.list({});
    assert.ok(deploys.some((d) => d.id === mine.id));
    assert.deepEqual([...new Set(deploys.map((d) => d.tenant))], ["team-a"]);
    assert.deepEqual((await team.list({ tenant: "team-b" })).deploys, []);
    const byId = await request("GET", `/api/v1/deploys/${theirs.id}`, { token: teamToken });
    assert.equal(byId.status, 404, byId.text);
    assert.equal(byId.json().error?.code, "not_found");
    assert.equal((await request("POST", `/api/v1/deploys/${theirs.id}/cancel`, { token: teamToken, body: "{}" })).status, 404);

    // The "*" token sees both tenants.
    const all = new Set((await admin.list({})).deploys.map((d) => d.id));
    assert.ok(all.has(mine.id) && all.has(theirs.id));
    assert.equal((await admin.deploy(mine.id)).tenant, "team-a");
  });

  it("answers /healthz without a token", async () => {
    const r = await request("GET", "/healthz");
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { status: "ok" });
  });

  it("exports deploy and per-target metrics after a deploy", async () => {
    const { id } = await admin.submit({ descriptor: tenantDescriptor("team-a", "shop", "2.0.0"), descriptor_file: "shop.yml" });
    assert.equal((await admin.deploy(id, 60)).status, "succeeded");
    const r = await request("GET", "/metrics");
    assert.equal(r.status, 200);
    const lines = r.text.split("\n");
    const buckets = lines.filter((l) => l.startsWith("manent_target_deploy_seconds_bucket{"));
    assert.ok(
      buckets.some(
        (l) => l.includes('plugin="noop"') && l.includes('phase="deploy"') && l.includes('status="deployed"') && l.includes('le="+Inf"'),
      ),
      `no noop/deploy/deployed bucket in:\n${buckets.join("\n")}`,
    );
    const inf = buckets.find((l) => l.includes('phase="deploy"') && l.includes('status="deployed"') && l.includes('le="+Inf"'))!;
    assert.ok(Number(inf.split(" ").pop()) >= 1, inf);
    const total = lines.find(
      (l) => l.startsWith("manent_deploys_total{") && l.includes('kind="deploy"') && l.includes('status="succeeded"'),
    );
    assert.ok(
      total && Number(total.split(" ").pop()) >= 1,
      `no succeeded deploys counted:\n${lines.filter((l) => l.startsWith("manent_deploys")).join("\n")}`,
    );
    assert.ok(lines.some((l) => l.startsWith("manent_step_attempts_total{") && l.includes('step="deploy"')));
  });

  it("sends the web UI's assets compressed when the browser accepts it, and whole when it does not", async () => {
    const url = new URL("/assets/app.js", server.url);
    // node's fetch would decode the body itself: ask with node:http to see what is sent.
    const get = (acceptEncoding: string | undefined) =>
      new Promise<{ status: number; headers: import("node:http").IncomingHttpHeaders; bytes: Buffer }>((resolve, reject) => {
        const req = httpGet(url, { headers: acceptEncoding ? { "accept-encoding": acceptEncoding } : {} }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
        });
        req.on("error", reject);
      });
    const plain = await get(undefined);
    assert.equal(plain.status, 200);
    assert.equal(plain.headers["content-encoding"], undefined);
    for (const [accept, encoding, decode] of [
      ["gzip, deflate, br", "br", brotliDecompressSync],
      ["gzip", "gzip", gunzipSync],
    ] as const) {
      const r = await get(accept);
      assert.equal(r.status, 200);
      assert.equal(r.headers["content-encoding"], encoding);
      assert.match(String(r.headers.vary), /accept-encoding/i);
      assert.match(String(r.headers["content-type"]), /javascript/);
      assert.ok(r.bytes.length < plain.bytes.length / 2, `${encoding}: ${r.bytes.length} of ${plain.bytes.length} bytes`);
      assert.ok(decode(r.bytes).equals(plain.bytes), `${encoding}: not the same script`);
      assert.ok(r.headers["content-security-policy"], "the page's headers are kept");
    }
  });

  it("answers an unknown route with 404 not_found", async () => {
    for (const [method, path, token] of [
      ["GET", "/nope", undefined],
      ["GET", "/api/v1/nothing", adminToken],
      ["DELETE", "/api/v1/deploys", adminToken],
    ] as const) {
      const r = await request(method, path, token ? { token } : {});
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      assert.equal(r.json().error?.code, "not_found");
    }
  });

  it("refuses a body over 1 MiB and records nothing", async () => {
    const before = (await admin.list({ limit: "1000" })).deploys.length;
    const body = JSON.stringify({ descriptor: { ...tenantDescriptor("team-a", "shop"), padding: "x".repeat((1 << 20) + 10) } });
    const r = await request("POST", "/api/v1/deploys", { token: adminToken, body }).catch((err: unknown) => ({
      status: 0,
      text: String(err),
      json: () => ({}),
    }));
    // The server answers 400 as soon as the limit is passed; it may close the socket before the rest is sent.
    if (r.status !== 0) {
      assert.equal(r.status, 400, r.text);
      const e = (r.json() as { error?: { code: string; message: string } }).error;
      assert.equal(e?.code, "invalid_argument");
      assert.match(e!.message, /larger than 1 MiB/);
    }
    assert.equal((await admin.list({ limit: "1000" })).deploys.length, before);
    // The server is still serving.
    assert.equal((await request("GET", "/healthz")).status, 200);
  });

  it("cancels a running deploy that cannot roll back: its plugin call stops, later targets are not deployed, and it ends failed naming what was deployed", async () => {
    await envconfig("team-a", "slow", "test", {
      plugin: "noop",
      targets: [{ host: "slow-1" }, { host: "slow-2" }, { host: "slow-3" }],
      params: params({ delay: "1500ms" }),
      max_retries: 0,
    });
    const { id } = await admin.submit({ descriptor: tenantDescriptor("team-a", "slow"), descriptor_file: "slow.yml" });
    // Wait until the plugin has finished the first target (it works on one at a time).
    let d: DeployRecord = await admin.deploy(id);
    while (!d.targets.some((t) => t.host === "slow-1" && t.status === "deployed")) {
      assert.equal(d.status === "queued" || d.status === "running", true, `deploy ended before cancel: ${JSON.stringify(d)}`);
      await new Promise((r) => setTimeout(r, 50));
      d = await admin.deploy(id);
    }
    const cancelled = await admin.cancel(id);
    assert.equal(cancelled.cancel?.outcome, "requested");
    assert.match(cancelled.cancel!.message, /not rolled back \(rollback\.enabled is false in the envconfig\).*ends failed/);
    const after = await admin.deploy(id, 30);
    // Not `cancelled`: slow-1 runs the new release, and the status says the deploy did not complete.
    assert.equal(after.status, "failed");
    assert.equal(after.error?.code, "canceled");
    assert.match(after.error!.message, /cancelled by a user during the deploy step; not rolled back .*: slow-1 run version 1\.0\.0/);
    // The plugin's own record that its call returned: had it gone on to slow-3, that target would
    // have been deployed before this line was written.
    let end: JournalEntry | undefined;
    while (!(end = (await readJournal(ws.path("journal"))).find((j) => j.deployment === id && j.call === "deploy_end"))) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(end.extra, "slow-1=deployed,slow-2=failed,slow-3=skipped");
    assert.equal(await readFile(ws.path("state", "slow-1.release"), "utf8"), "1.0.0");
    await assert.rejects(readFile(ws.path("state", "slow-2.release"), "utf8"), /ENOENT/);
    await assert.rejects(readFile(ws.path("state", "slow-3.release"), "utf8"), /ENOENT/);
    const final = await admin.deploy(id);
    assert.equal(final.status, "failed", JSON.stringify(final));
    assert.deepEqual(
      final.targets.filter((t) => t.status === "deployed").map((t) => t.host),
      ["slow-1"],
    );
    assert.notEqual(final.steps.find((s) => s.name === "deploy")?.status, "succeeded");
    const again = await request("POST", `/api/v1/deploys/${id}/cancel`, { token: adminToken, body: "{}" });
    assert.equal(again.status, 412, again.text);
    assert.equal(again.json().error?.code, "failed_precondition");
  });

  it("lets only a token for all tenants restart a plugin, refuses a built-in or unknown one, and audits each try", async () => {
    const cases = [
      {
        token: teamToken,
        name: "noop",
        status: 403,
        code: "permission_denied",
        message:
          /team-a may not plugin_restart in tenant \*, application \*, environment \*: needs the plugin_restart permission \(role admin\)/,
      },
      {
        token: adminToken,
        name: "noop",
        status: 412,
        code: "failed_precondition",
        message: /plugin noop is built in: it runs inside the server/,
      },
      { token: adminToken, name: "nope", status: 404, code: "not_found", message: /no plugin nope \(configured: noop/ },
      { token: adminToken, name: "Bad_Name", status: 400, code: "invalid_argument", message: /plugin names are lower-case/ },
    ];
    for (const c of cases) {
      const r = await request("POST", `/api/v1/plugins/${c.name}/restart`, { token: c.token });
      assert.equal(r.status, c.status, r.text);
      assert.equal(r.json().error?.code, c.code);
      assert.match(r.json().error!.message, c.message);
    }
    const { entries } = await admin.audit({ action: "plugin_restart" });
    assert.deepEqual(
      entries.map((e) => [e.actor, e.tenant, e.outcome]).reverse(),
      [
        ["team-a", null, "permission_denied"],
        ["ci", null, "failed_precondition"],
        ["ci", null, "not_found"],
      ],
      "the request refused by its schema changes nothing, so it is not an action",
    );
    assert.match(entries.at(-1)!.message!, /^plugin noop: team-a may not plugin_restart in tenant \*/);
    // Server-wide entries are not a tenant's: a tenant's token does not see them.
    assert.deepEqual((await team.audit({ action: "plugin_restart" })).entries, []);
  });
});
