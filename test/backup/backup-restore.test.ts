import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ApiClient } from "../../src/cli/api-client.js";
import { serverBin, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);
const token = "backup-restore-admin-token";

/** A workspace whose server uses the embedded Postgres (no database_url) and the noop plugin. */
async function workspace(): Promise<{ ws: Workspace; config: string; artifact: string }> {
  const ws = await createWorkspace("manent-backup-");
  const artifact = await ws.write("dist/app.txt", "shop\n");
  await ws.write("envconfig/untenanted/shop/shop/test.yml", {
    plugin: "noop",
    targets: [{ host: "shop-1" }],
    params: { state_dir: ws.path("state"), journal: ws.path("journal") },
  });
  const config = await ws.write(
    "manent.yml",
    manentYml(undefined, { auth: { tokens: [{ name: "admin", tenant: "*", token: "env:BACKUP_TEST_TOKEN" }] } }),
  );
  return { ws, config, artifact };
}

async function serverCommand(config: string, cwd: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(process.execPath, [serverBin, "-c", config, ...args], { cwd }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

/**
 * manent-server backup / restore of the embedded Postgres: deploys made on one workdir are backed
 * up, restored into a new workdir, and a server there shows their history and audit log and rolls
 * back to the first version.
 */
describe("backup and restore of the embedded Postgres", () => {
  let source: Awaited<ReturnType<typeof workspace>>;
  let target: Awaited<ReturnType<typeof workspace>>;
  let server: ServerProcess | undefined;
  let archive: string;
  const env = { BACKUP_TEST_TOKEN: token };

  before(async () => {
    source = await workspace();
    target = await workspace();
    archive = source.ws.path("manent-backup.tar.gz");
  });
  after(async () => {
    await server?.stop();
  });

  it("backs up a stopped server's deploys, refusing while it runs", async () => {
    server = await startServer(source.config, { cwd: source.ws.dir, env, token });
    const api = new ApiClient(server.url, token);
    for (const version of ["1.0.0", "2.0.0"]) {
      const d = await api.submit({ descriptor: descriptor("shop", "test", source.artifact, version), descriptor_file: "shop.yml" });
      assert.equal((await api.deploy(d.id, 60)).status, "succeeded");
    }
    const running = await serverCommand(source.config, source.ws.dir, ["backup", "--output", archive]);
    assert.equal(running.code, 2, running.stderr);
    assert.match(running.stderr, /the embedded Postgres of workdir .* is running \(pid \d+\): stop manent-server first/);
    await server.stop();
    server = undefined;

    const backup = await serverCommand(source.config, source.ws.dir, ["backup", "--output", archive]);
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /^backed up the embedded Postgres of .*\/work to .*manent-backup\.tar\.gz \(\d+ bytes\)$/m);
    assert.equal((await stat(archive)).mode & 0o777, 0o600);
  });

  it("restores into a new workdir: history, audit log and a rollback work there", async () => {
    const restore = await serverCommand(target.config, target.ws.dir, ["restore", "--input", archive]);
    assert.equal(restore.code, 0, restore.stderr);
    server = await startServer(target.config, { cwd: target.ws.dir, env, token });
    const api = new ApiClient(server.url, token);
    const { deploys } = await api.list({ application: "shop" });
    assert.deepEqual(
      deploys.map((d) => [d.version, d.status]),
      [
        ["2.0.0", "succeeded"],
        ["1.0.0", "succeeded"],
      ],
    );
    const audit = await api.audit({});
    assert.deepEqual(
      audit.entries
        .filter((e) => e.action === "submit")
        .map((e) => e.deploy_id)
        .sort(),
      deploys.map((d) => d.id).sort(),
    );
    const back = await api.rollback({ descriptor: descriptor("shop", "test", target.artifact, "2.0.0"), descriptor_file: "shop.yml" });
    const done = await api.deploy(back.id, 60);
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.equal(done.version, "1.0.0");
    await server.stop();
    server = undefined;
  });

  it("refuses a workdir that has a Postgres already, a file that is no backup, and an external database, exit 2", async () => {
    const again = await serverCommand(target.config, target.ws.dir, ["restore", "--input", archive]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /has an embedded Postgres already: restore into a new workdir/);

    const fresh = await workspace();
    const junk = await fresh.ws.write("junk.tar.gz", "not an archive");
    const bad = await serverCommand(fresh.config, fresh.ws.dir, ["restore", "--input", junk]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /junk\.tar\.gz: not a manent-server backup/);

    // Archives with the right member names but not the content: only PG_VERSION and a password, then a made-up control file.
    const fake = fresh.ws.path("fake");
    await mkdir(join(fake, "data", "global"), { recursive: true });
    await writeFile(join(fake, "password"), "pw\n");
    await writeFile(join(fake, "data", "PG_VERSION"), "17\n");
    await run("tar", ["--create", "--gzip", "--file", fresh.ws.path("fake.tar.gz"), "-C", fake, "password", "data"]);
    const onlyNames = await serverCommand(fresh.config, fresh.ws.dir, ["restore", "--input", fresh.ws.path("fake.tar.gz")]);
    assert.equal(onlyNames.code, 2, onlyNames.stderr);
    assert.match(onlyNames.stderr, /fake\.tar\.gz: not a manent-server backup: it has no data\/global\/pg_control/);
    await writeFile(join(fake, "data", "global", "pg_control"), Buffer.alloc(8192, 7));
    await run("tar", ["--create", "--gzip", "--file", fresh.ws.path("fake2.tar.gz"), "-C", fake, "password", "data"]);
    const madeUp = await serverCommand(fresh.config, fresh.ws.dir, ["restore", "--input", fresh.ws.path("fake2.tar.gz")]);
    assert.equal(madeUp.code, 2, madeUp.stderr);
    assert.match(madeUp.stderr, /data\/global\/pg_control is not a Postgres 17 control file/);
    // Nothing was left in the workdir: a real backup restores there afterwards.
    assert.equal(existsSync(fresh.ws.path("work/postgres/password")), false);
    assert.equal((await serverCommand(fresh.config, fresh.ws.dir, ["restore", "--input", archive])).code, 0);

    const external = await fresh.ws.write("external.yml", manentYml("postgres://manent:pw@127.0.0.1:1/manent"));
    const refused = await serverCommand(external, fresh.ws.dir, ["backup", "--output", fresh.ws.path("x.tar.gz")]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /dbos\.database_url is set: back up that Postgres with its own tools \(pg_dump/);
  });
});
