import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const rounds = Number(process.env.FLEET_START_ROUNDS ?? 10);

/**
 * Issue 20, item 3: servers started at the same instant on a fresh database (a Deployment with
 * replicas: 3) all come up. Before the schema lock covered DBOS's launch, one of them exited with
 * "deadlock detected" or "tuple concurrently updated" nearly every time.
 */
describe("several servers started at once", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
  });
  after(async () => pgServer?.stop());

  it(`three servers started together on a fresh database, ${rounds} rounds: all healthy`, async () => {
    for (let round = 0; round < rounds; round++) {
      const databaseUrl = await pgServer.createDatabase({ empty: true });
      const configs = await Promise.all(
        [1, 2, 3].map((n) =>
          ws.write(
            `round-${round}/server-${n}.yml`,
            manentYml(undefined, {
              dbos: { database_url: databaseUrl, executor_id: `worker-${n}` },
              workdir: `./round-${round}/work-${n}`,
            }),
          ),
        ),
      );
      const started = await Promise.allSettled(configs.map((config) => startServer(config, { cwd: ws.dir })));
      const servers = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
      try {
        const failures = started.flatMap((s) => (s.status === "rejected" ? [String(s.reason)] : []));
        assert.deepEqual(failures, [], `round ${round}`);
        for (const server of servers) {
          const health = await fetch(new URL("/healthz", server.url));
          assert.equal(health.status, 200, `round ${round}: ${server.url}: ${await health.text()}`);
          const list = await fetch(new URL("/api/v1/deploys?limit=1", server.url));
          assert.equal(list.status, 200, `round ${round}: ${server.url}: ${await list.text()}`);
        }
      } finally {
        await Promise.all(servers.map((s: ServerProcess) => s.stop()));
      }
    }
  });
});
