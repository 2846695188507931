import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A secret reaches the plugin during its call and nowhere else: not the logs, not the API or CLI
 * output, not a single row of the database (manent's tables and DBOS's checkpoints).
 */
describe("secrets", () => {
  const fileSecret = `file-secret-${randomBytes(12).toString("hex")}`;
  const envSecret = `env-secret-${randomBytes(12).toString("hex")}`;
  let db: TestPostgres;
  let url: string;
  let ws: Workspace;
  let server: ServerProcess;

  before(async () => {
    db = await TestPostgres.start();
    ws = await createWorkspace();
    url = await db.createDatabase();
    await ws.write("keys/deploy-key", `${fileSecret}\n`);
    const artifact = await ws.write("dist/app.txt", "x\n");
    await ws.write("d.yml", descriptor("vault", "prod", artifact));
    await ws.write("envconfig/untenanted/vault/vault/prod.yml", {
      plugin: "noop",
      targets: [{ host: "v1" }],
      params: { read_secret: "deploy-key", state_dir: ws.path("state") },
      secrets: [
        { name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` },
        { name: "api-token", ref: "env:MANENT_TEST_API_TOKEN" },
      ],
    });
    server = await startServer(await ws.write("manent.yml", manentYml(url)), { cwd: ws.dir, env: { MANENT_TEST_API_TOKEN: envSecret } });
  });
  after(async () => {
    await server?.stop();
    await db?.stop();
  });

  it("are read by the plugin during the call and appear in no log, output or database row", async () => {
    const r = await runCli(["deploy", "-f", "d.yml", "-o", "json"], { cwd: ws.dir, server: server.url });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = JSON.parse(r.stdout) as { steps: { name: string; output: { result: string } }[] };
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output.result) as {
      targets: { details: Record<string, string> }[];
    };
    assert.equal(result.targets[0]!.details.secret_length, String(fileSecret.length), "the plugin read the secret");

    const history = await runCli(["history", "-o", "json"], { cwd: ws.dir, server: server.url });
    const client = new pg.Client(url);
    await client.connect();
    let rows = "";
    try {
      const tables = await client.query<{ schema: string; name: string }>(
        `select table_schema as schema, table_name as name from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema')`,
      );
      assert.ok(
        tables.rows.some((t) => t.schema === "dbos"),
        "DBOS's tables are in the same database",
      );
      for (const t of tables.rows) {
        const all = await client.query(`select t::text as row from "${t.schema}"."${t.name}" t`);
        rows += all.rows.map((x: { row: string }) => x.row).join("\n");
      }
    } finally {
      await client.end();
    }
    assert.ok(rows.includes("deploy-key"), "the reference is stored, as it should be");
    for (const [where, text] of [
      ["server log", server.logs()],
      ["CLI output", r.stdout + r.stderr + history.stdout],
      ["database", rows],
    ] as const) {
      assert.equal(text.includes(fileSecret), false, `the file secret leaked into the ${where}`);
      assert.equal(text.includes(envSecret), false, `the env secret leaked into the ${where}`);
    }
  });
});
