import assert from "node:assert/strict";
import { readFile, readdir, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { loadManentConfig } from "../../src/core/config/index.js";
import { PgRetentionStore } from "../../src/storage/pg-retention.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * History retention on a real server: what the policy lets go is deleted with its events and its
 * DBOS workflow's rows; what a rollback, a retry, a drift check or a kept release needs stays; the
 * audit log is exported before it is deleted.
 */
describe("history retention", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let databaseUrl: string;
  let db: pg.Client;
  let artifact: string;

  const envconfig = (app: string, env: string, params: Record<string, string> = {}) =>
    ws.write(`envconfig/untenanted/${app}/${app}/${env}.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-${env}-1` }],
      params: { state_dir: ws.path("state"), ...params },
    });
  const deploy = async (app: string, env: string, version: string) => {
    const { id } = await server.api.submit({ descriptor: descriptor(app, env, artifact, version), descriptor_file: `${app}.yml` });
    return server.api.deploy(id, 60);
  };
  const count = async (sql: string, ids: string[]) => Number((await db.query<{ n: string }>(sql, [ids])).rows[0]!.n);

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    databaseUrl = await pgServer.createDatabase();
    artifact = await ws.write("dist/app.txt", "retention\n");
    const config = await ws.write(
      "manent.yml",
      manentYml(databaseUrl, {
        uploads: { retention: { keep_releases: 1 } },
        retention: {
          sweep_interval: 0,
          deploys: { keep_last: 3 },
          releases: { keep_last: 1 },
          rules: [{ application: "api", deploys: { keep_last: 1 } }],
          audit: { keep_for: "1d", export_dir: "./audit-export" },
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
    db = new pg.Client(databaseUrl);
    await db.connect();
  });
  after(async () => {
    await db?.end();
    await server?.stop();
    await pgServer?.stop();
  });

  it("deletes ended deploys and releases beyond the policy with their events and workflow rows, keeping what is still needed", async () => {
    await envconfig("shop", "dev");
    const shop = [];
    for (const v of ["1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0", "6.0.0"]) shop.push(await deploy("shop", "dev", v));
    assert.ok(shop.every((d) => d.status === "succeeded"));
    // api keeps its newest deploy only (a rule), which failed: a retry and a rollback must still work.
    await envconfig("api", "dev");
    const api = [];
    for (const v of ["1.0.0", "2.0.0", "3.0.0"]) api.push(await deploy("api", "dev", v));
    await envconfig("api", "dev", { fail_hosts: "api-dev-1" });
    const failed = await deploy("api", "dev", "4.0.0");
    assert.notEqual(failed.status, "succeeded");
    await envconfig("api", "dev");
    // Three releases of cart through dev and staging: the newest is kept with its stage deploys.
    for (const e of ["dev", "staging"]) await envconfig("cart", e);
    await ws.write("envconfig/untenanted/cart/pipeline.yml", { stages: [{ environment: "dev" }, { environment: "staging" }] });
    const releases = [];
    for (const v of ["1.0.0", "2.0.0", "3.0.0"]) {
      const { id } = await server.api.startRelease({ descriptor: descriptor("cart", "dev", artifact, v), descriptor_file: "cart.yml" });
      for (;;) {
        const r = await server.api.release(id);
        if (r.status !== "running") {
          assert.equal(r.status, "succeeded", JSON.stringify(r.error));
          releases.push(r);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const before = await count(`select count(*) as n from dbos.workflow_status where workflow_uuid = any($1)`, [
      ...shop.map((d) => d.id),
      ...api.map((d) => d.id),
    ]);
    assert.equal(before, 9);
    // Each key's next deploy deleted the DBOS input of the one before (its workflow ended): only
    // the newest of each key keeps its own. The sweep deletes the others all the same.
    const inputs = async (ids: string[]) =>
      (await db.query<{ id: string }>(`select workflow_uuid as id from dbos.workflow_input where workflow_uuid = any($1)`, [ids])).rows
        .map((r) => r.id)
        .sort();
    assert.deepEqual(await inputs([...shop, ...api, failed].map((d) => d.id)), [shop[5]!.id, failed.id].sort());

    const sweep = await runCli(["retention", "sweep", "-o", "json"], { cwd: ws.dir, env: { MANENT_SERVER: server.url } });
    assert.equal(sweep.code, 0, sweep.stderr);
    const swept = JSON.parse(sweep.stdout) as { deploys: number; releases: number };
    // shop: 1.0.0-3.0.0 (beyond the newest 3); api: 1.0.0 (beyond its newest, and not one of the
    // two newest versions released, 3.0.0 and 2.0.0); cart: two releases. Their stage deploys stay
    // (cart's dev and staging hold 3 each, within keep_last 3).
    assert.deepEqual([swept.deploys, swept.releases], [4, 2]);
    const gone = [...shop.slice(0, 3).map((d) => d.id), api[0]!.id];
    const kept = [...shop.slice(3).map((d) => d.id), ...api.slice(1).map((d) => d.id), failed.id];
    for (const id of gone) await assert.rejects(server.api.deploy(id), /not found/);
    for (const id of kept) assert.equal((await server.api.deploy(id)).id, id);
    for (const r of releases.slice(0, 2)) await assert.rejects(server.api.release(r.id), /not found/);
    assert.equal((await server.api.release(releases[2]!.id)).status, "succeeded");
    const goneReleases = releases.slice(0, 2).map((r) => r.id);
    assert.equal(
      await count(`select count(*) as n from dbos.workflow_status where workflow_uuid = any($1)`, [...gone, ...goneReleases]),
      0,
    );
    assert.equal(
      await count(`select count(*) as n from dbos.operation_outputs where workflow_uuid = any($1)`, [...gone, ...goneReleases]),
      0,
    );
    assert.equal(
      await count(`select count(*) as n from manent.events where deploy_id = any($1) or release_id = any($1)`, [...gone, ...goneReleases]),
      0,
    );
    assert.equal(await count(`select count(*) as n from manent.deploy_steps where deploy_id = any($1)`, gone), 0);
    assert.equal(await count(`select count(*) as n from dbos.workflow_status where workflow_uuid = any($1)`, kept), kept.length);
    // No workflow row is left that no record names.
    const orphans = await db.query(
      `select workflow_uuid, name from dbos.workflow_status w
       where not exists (select 1 from manent.deploys d where d.id = w.workflow_uuid)
         and not exists (select 1 from manent.releases r where r.id = w.workflow_uuid)`,
    );
    assert.deepEqual(orphans.rows, []);

    // What was kept still works: a retry of the failed newest (with the envconfig it ran, so it
    // fails again), then a rollback from 3.0.0, the version running, to 2.0.0.
    const retried = await server.api.retry(failed.id);
    const retry = await server.api.deploy(retried.id, 60);
    assert.equal(retry.retry_of, failed.id);
    assert.equal(retry.status, failed.status, JSON.stringify(retry.error));
    const back = await server.api.rollback({ descriptor: descriptor("api", "dev", artifact), descriptor_file: "api.yml" });
    const rolledBack = await server.api.deploy(back.id, 60);
    assert.equal(rolledBack.status, "succeeded", JSON.stringify(rolledBack.error));
    assert.equal(rolledBack.version, "2.0.0");
    // A second sweep finds what the new deploys pushed out, and nothing twice.
    const again = JSON.parse(
      (await runCli(["retention", "sweep", "-o", "json"], { cwd: ws.dir, env: { MANENT_SERVER: server.url } })).stdout,
    ) as { deploys: number };
    assert.ok(again.deploys >= 1, JSON.stringify(again));
  });

  it("exports audit entries past keep_for before deleting them, and deletes none when the export fails", async () => {
    const total = Number((await db.query<{ n: string }>(`select count(*) as n from manent.audit`)).rows[0]!.n);
    assert.ok(total > 10, `${total} audit entries`);
    // Five entries of two days ago (the audit log only takes inserts: none can be made older).
    const old = await db.query<{ id: string }>(
      `insert into manent.audit (at, actor, tenant, action, outcome, message)
       select now() - interval '2 days', 'ci', 'untenanted', 'submit', 'succeeded', 'entry ' || n from generate_series(1, 5) n
       returning id::text`,
    );
    // The export directory cannot be made: nothing is deleted, and the answer says why.
    await writeFile(ws.path("audit-export"), "not a directory");
    const refused = await fetch(`${server.url}/api/v1/retention/sweep`, { method: "POST" });
    assert.equal(refused.status, 503, await refused.clone().text());
    assert.match(
      ((await refused.json()) as { error: { message: string } }).error.message,
      /cannot export the audit log to .*audit-export.*nothing was deleted/,
    );
    assert.equal(
      Number(
        (await db.query<{ n: string }>(`select count(*) as n from manent.audit where id = any($1::bigint[])`, [old.rows.map((r) => r.id)]))
          .rows[0]!.n,
      ),
      5,
    );

    await (await import("node:fs/promises")).rm(ws.path("audit-export"));
    const res = await fetch(`${server.url}/api/v1/retention/sweep`, { method: "POST" });
    assert.equal(res.status, 200, await res.clone().text());
    const swept = (await res.json()) as { audit_entries: number; audit_files: string[] };
    assert.equal(swept.audit_entries, 5);
    assert.equal(swept.audit_files.length, 1);
    assert.deepEqual(await readdir(ws.path("audit-export")), [swept.audit_files[0]!.split("/").at(-1)]);
    const exported = (await readFile(swept.audit_files[0]!, "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; action: string });
    assert.deepEqual(
      exported.map((e) => e.id),
      old.rows.map((r) => r.id),
    );
    assert.equal(
      Number(
        (await db.query<{ n: string }>(`select count(*) as n from manent.audit where id = any($1::bigint[])`, [old.rows.map((r) => r.id)]))
          .rows[0]!.n,
      ),
      0,
    );
    // The sweeps themselves are audited.
    const audit = await server.api.audit({ action: "retention_sweep" });
    assert.ok(audit.entries.length >= 3, JSON.stringify(audit.entries.map((e) => e.outcome)));
  });

  it("lets one server of a fleet sweep at a time (a lease in the database)", async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    try {
      const store = new PgRetentionStore(pool);
      await store.migrate();
      assert.equal(await store.takeLease("test-lease", "alpha", 60_000), true);
      assert.equal(await store.takeLease("test-lease", "beta", 60_000), false, "held by alpha");
      assert.equal(await store.takeLease("test-lease", "alpha", 60_000), true, "alpha renews it");
      await pool.query(`update manent.leases set until = now() - interval '1 second' where name = 'test-lease'`);
      assert.equal(await store.takeLease("test-lease", "beta", 60_000), true, "expired: beta takes it");
    } finally {
      await pool.end();
    }
  });

  it("refuses a policy without a bound, naming the field", async () => {
    const file = await ws.write("bad.yml", manentYml(undefined, { retention: { deploys: {} } }));
    await assert.rejects(loadManentConfig(file, ws.dir), /retention\.deploys.*needs keep_last, keep_for or both/);
    const small = await ws.write("bad2.yml", manentYml(undefined, { retention: { audit: { keep_for: "1h", export_dir: "x" } } }));
    await assert.rejects(loadManentConfig(small, ws.dir), /retention\.audit\.keep_for.*at least 1d/);
  });
});
