import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ApiClient } from "../../src/cli/api-client.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const connections = 10;
/** Besides its pools, a server holds one connection of its own: its event hub's LISTEN (DBOS's listener is one of its pool's). */
const listeners = 1;
const burst = 60;

/**
 * manent.yml's dbos.connections, end to end: a server connects to Postgres as a role of its own,
 * whose sessions are counted while a burst of deploys presses its pools. No CONNECTION LIMIT on the
 * role: a refused connection is retried, and would hide a server that tries to open more.
 */
describe("dbos.connections, counted in Postgres", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let admin: pg.Client;
  /** The role and a database of the cluster to drop it from, once its database is dropped (a shared Postgres outlives the file). */
  let role: { name: string; from: string } | undefined;

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    for (let i = 0; i < burst; i++)
      await ws.write(`envconfig/untenanted/app${i}/app${i}/conn.yml`, { plugin: "noop", targets: [{ host: `h${i}` }] });
  });
  after(async () => {
    await admin?.end().catch(() => undefined);
    await pgServer?.stop();
    if (!role) return;
    const cluster = new pg.Client(role.from);
    await cluster.connect();
    await cluster.query(`drop role if exists ${role.name}`).finally(() => cluster.end());
  });

  it(`a server with dbos.connections ${connections} never holds more than ${connections + listeners}, and its pools fill under a burst`, async () => {
    const adminUrl = await pgServer.createDatabase({ empty: true });
    const database = new URL(adminUrl).pathname.slice(1);
    const name = `manent_conn_${process.pid}_${Date.now()}`;
    const password = randomBytes(12).toString("hex");
    admin = new pg.Client(adminUrl);
    await admin.connect();
    await admin.query(`create role ${name} login password '${password}'`);
    const maintenance = new URL(adminUrl);
    maintenance.pathname = "/postgres";
    role = { name, from: maintenance.toString() };
    await admin.query(`alter database ${database} owner to ${name}`);
    const url = new URL(adminUrl);
    url.username = name;
    url.password = password;

    const config = await ws.write("manent.yml", manentYml(undefined, { dbos: { database_url: url.toString(), connections } }));
    const server = await startServer(config, { cwd: ws.dir });
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await admin.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where usename = $1", [name]);
        peak = Math.max(peak, r.rows[0]!.n);
      }
    })();
    try {
      const api = new ApiClient(server.url, undefined);
      const artifact = await ws.write("dist/app.txt", "conn\n");
      const ids = await Promise.all(
        Array.from(
          { length: burst },
          async (_, i) => (await api.submit({ descriptor: descriptor(`app${i}`, "conn", artifact), descriptor_file: "conn" })).id,
        ),
      );
      const ended = await Promise.all(
        ids.map(async (id) => {
          let d = await api.deploy(id, 60);
          while (d.status === "queued" || d.status === "running") d = await api.deploy(id, 60);
          return d;
        }),
      );
      assert.deepEqual(
        ended.filter((d) => d.status !== "succeeded").map((d) => ({ id: d.id, status: d.status, error: d.error })),
        [],
      );
    } finally {
      sampling = false;
      await sampler;
      await server.stop();
    }
    // Both pools full, and not one more: the burst asks for more than the bound (a server that
    // ignored the setting, with the default's 20 and 10, held over 11).
    assert.equal(peak, connections + listeners);
  });
});
