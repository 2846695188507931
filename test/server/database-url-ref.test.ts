import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { serverBin, startServer, logMessages } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml } from "../support/workspace.js";

/**
 * dbos.database_url may name where the URL is kept (env:NAME, file:/path), so the password stays
 * out of manent.yml (a Kubernetes Secret, a systemd EnvironmentFile); `serve --executor-id` gives
 * each server of a fleet its id when they share one manent.yml (the Helm chart's pods).
 */
describe("dbos.database_url by reference, --executor-id", () => {
  let postgres: TestPostgres;
  before(async () => (postgres = await TestPostgres.start()));
  after(() => postgres.stop());

  async function failedStart(config: object, env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
    const ws = await createWorkspace();
    const file = await ws.write("manent.yml", config);
    const child = spawn(process.execPath, [serverBin, "-c", file, "serve"], {
      cwd: ws.dir,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    // As an operator reads the JSON log (jq -r .msg), and the raw log for what must never be in it.
    return { code, stderr: `${logMessages(stderr)}\n${stderr}` };
  }

  it("reads the URL from an env: reference and runs under the executor id given on the command line", async () => {
    const url = await postgres.createDatabase();
    const ws = await createWorkspace();
    const config = await ws.write("manent.yml", manentYml("env:MANENT_TEST_DATABASE_URL"));
    const server = await startServer(config, { cwd: ws.dir, env: { MANENT_TEST_DATABASE_URL: url } });
    try {
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      const client = new pg.Client(url);
      await client.connect();
      try {
        const servers = await client.query<{ executor_id: string }>("select executor_id from manent.servers");
        assert.deepEqual(
          servers.rows.map((r) => r.executor_id),
          ["local"],
        );
      } finally {
        await client.end();
      }
    } finally {
      await server.stop();
    }
    const child = spawn(
      process.execPath,
      [serverBin, "-c", config, "serve", "--listen", "127.0.0.1:0", "--executor-id", "manent-7f9c-x2"],
      {
        cwd: ws.dir,
        env: { ...process.env, MANENT_TEST_DATABASE_URL: url },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        let log = "";
        child.stderr.on("data", (d: Buffer) => {
          log += d.toString();
          if (/"msg":"manent-server listening on /.test(log)) resolve();
        });
        child.once("exit", (code) => reject(new Error(`exited ${String(code)}`)));
      });
      const client = new pg.Client(url);
      await client.connect();
      try {
        const servers = await client.query<{ executor_id: string }>("select executor_id from manent.servers order by 1");
        assert.ok(
          servers.rows.some((r) => r.executor_id === "manent-7f9c-x2"),
          JSON.stringify(servers.rows),
        );
      } finally {
        await client.end();
      }
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });

  it("refuses to start, exit 2, naming the reference and never the value, when it is unset or not a Postgres URL", async () => {
    const unset = await failedStart(manentYml("env:MANENT_NOT_SET_ANYWHERE"));
    assert.equal(unset.code, 2, unset.stderr);
    assert.match(unset.stderr, /dbos\.database_url.*environment variable MANENT_NOT_SET_ANYWHERE is not set/);

    const ws = await createWorkspace();
    const file = await ws.write("db-url", "mysql://root:hunter2-secret@db:3306/manent\n");
    const wrong = await failedStart(manentYml(`file:${file}`));
    assert.equal(wrong.code, 2, wrong.stderr);
    assert.match(wrong.stderr, new RegExp(`dbos\\.database_url: file:${file} does not hold a postgres:// URL`));
    assert.doesNotMatch(wrong.stderr, /hunter2/);

    const bad = await failedStart(manentYml("vault:secret/manent"));
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /database_url.*"vault" is not supported/);
  });
});
