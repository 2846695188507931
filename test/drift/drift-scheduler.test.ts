import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import type { Logger } from "../../src/core/contract/index.js";
import { loadManentConfig } from "../../src/core/config/index.js";
import { DriftChecker } from "../../src/core/drift/drift-checker.js";
import type { DriftStore } from "../../src/core/drift/drift-record.js";
import { DriftScheduler } from "../../src/core/drift/drift-scheduler.js";
import { PluginRegistry } from "../../src/core/engine/plugin-registry.js";
import { nodeNetwork } from "../../src/net/node-network.js";
import { builtinPlugins } from "../../src/plugins/builtin.js";
import { PgDriftStore } from "../../src/storage/pg-drift-store.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * What the drift scheduler reads after deploys end: the keys of those deploys, not every key (a
 * look at every key read each key's records and envconfig at every second of a busy fleet). Real
 * deploys through a real server; the scheduler under test runs in this process on the same
 * database, with the real store, whose reads are recorded as they are made.
 */
describe("drift scheduler", () => {
  let postgres: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let pool: pg.Pool;
  let databaseUrl: string;
  const ids: Record<string, string> = {};
  const logger: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

  before(async () => {
    postgres = await TestPostgres.start();
    ws = await createWorkspace();
    const artifact = await ws.write("dist/app.txt", "hello\n");
    databaseUrl = await postgres.createDatabase();
    for (const app of ["alpha", "beta", "gamma"])
      await ws.write(`envconfig/untenanted/${app}/${app}/test.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        drift: { interval: "1h" },
      });
    server = await startServer(await ws.write("manent.yml", manentYml(databaseUrl)), { cwd: ws.dir });
    for (const app of ["alpha", "beta", "gamma"]) {
      const { id } = await server.api.submit({ descriptor: descriptor(app, "test", artifact, "1.0.0"), descriptor_file: `${app}.yml` });
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
      ids[app] = id;
    }
    pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    // An idle connection that Postgres's stop ends before the pool does is not a failure of a test.
    pool.on("error", () => undefined);
  });
  after(async () => {
    await server?.stop();
    await pool?.end();
    await postgres?.stop();
  });

  it("reads the recorded releases of the keys of given deploys only", async () => {
    const store = new PgDriftStore(pool);
    const of = async (deployIds: string[]) => (await store.recordedReleasesOf(deployIds)).map((r) => r.application).sort();
    assert.deepEqual(await of([ids.beta!]), ["beta"]);
    assert.deepEqual(await of([ids.alpha!, ids.gamma!]), ["alpha", "gamma"]);
    assert.deepEqual(await of([]), []);
    assert.deepEqual(await of(["no-such-deploy"]), []);
    const [beta] = await store.recordedReleasesOf([ids.beta!]);
    assert.deepEqual(
      beta,
      await store.recordedRelease({ tenant: "untenanted", application: "beta", artifact: "beta", environment: "test" }),
    );
  });

  it("looks at every key at start, then, after deploys end, at their keys only", async () => {
    const config = await loadManentConfig(join(ws.dir, "manent.yml"), ws.dir);
    const real = new PgDriftStore(pool);
    const reads: string[] = [];
    let secondRead!: () => void;
    const twoReads = new Promise<void>((resolve) => (secondRead = resolve));
    const read = (what: string) => {
      reads.push(what);
      if (reads.length === 2) secondRead();
    };
    // The real store, its reads of recorded releases written down.
    const store: DriftStore = new Proxy(real, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop === "recordedReleases")
          return async () => {
            const releases = await target.recordedReleases();
            read("every key");
            return releases;
          };
        if (prop === "recordedReleasesOf")
          return async (deployIds: string[]) => {
            const releases = await target.recordedReleasesOf(deployIds);
            read(`keys of ${deployIds.length} deploy(s): ${releases.map((r) => r.application).join(", ")}`);
            return releases;
          };
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const plugins = await PluginRegistry.fromConfig(config, builtinPlugins, logger);
    const checker = new DriftChecker({ config, plugins, store, logger, network: nodeNetwork() });
    const scheduler = new DriftScheduler(config, store, checker, logger);
    try {
      scheduler.start();
      scheduler.deployEnded(ids.alpha!);
      scheduler.deployEnded(ids.gamma!);
      await twoReads;
      assert.deepEqual(reads, ["every key", "keys of 2 deploy(s): alpha, gamma"]);
    } finally {
      await scheduler.stop();
      await plugins.close();
    }
  });
});

/**
 * In a fleet, the key of a deploy that ended is looked at by the server that ran it, told by its
 * own engine: every server reading every deploy's end through its event hub, and looking at its
 * key, did that work once per server (a statement of 35-45 ms a second on each, at 100 deploys a
 * second). Two real servers on one database; which one ran a deploy is DBOS's executor of its workflow.
 */
describe("drift looks after deploys in a fleet", () => {
  let postgres: TestPostgres;
  let ws: Workspace;
  const servers: Record<string, ServerProcess> = {};
  let db: pg.Client;
  const apps = ["one", "two", "three", "four"];

  before(async () => {
    postgres = await TestPostgres.start();
    ws = await createWorkspace();
    const databaseUrl = await postgres.createDatabase();
    for (const app of apps)
      await ws.write(`envconfig/untenanted/${app}/${app}/test.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        drift: { interval: "1h" },
      });
    for (const name of ["a", "b"]) {
      const config = await ws.write(
        `manent-${name}.yml`,
        manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: name }, workdir: `./work-${name}` }),
      );
      servers[name] = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "debug" } });
    }
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
  });
  after(async () => {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    await db?.end();
    await postgres?.stop();
  });

  /** The scheduler's log line of a look at the keys of deploys that ended, one of them `id`. */
  const looked = (id: string) => new RegExp(`^(?=.*"msg":"drift checks: looked at the keys of deploys that ended")(?=.*"${id}")`);

  it("looks at a deploy's key on the server that ran it, and only there", async () => {
    const artifact = await ws.write("dist/app.txt", "hello\n");
    const ran: Record<string, string> = {};
    for (const [i, app] of apps.entries()) {
      const via = servers[i % 2 === 0 ? "a" : "b"]!;
      const { id } = await via.api.submit({ descriptor: descriptor(app, "test", artifact, "1.0.0"), descriptor_file: `${app}.yml` });
      assert.equal((await via.api.deploy(id, 60)).status, "succeeded");
      const { rows } = await db.query<{ executor_id: string }>(`select executor_id from dbos.workflow_status where workflow_uuid = $1`, [
        id,
      ]);
      const runner = rows[0]!.executor_id;
      ran[id] = runner;
      // The engine of the server that ran it tells its scheduler, which looks at the key within a second.
      await servers[runner]!.logged(looked(id));
    }
    // Each key was looked at, and its first check claimed (its due time set one interval on).
    const { rows } = await db.query<{ application: string }>(`select application from manent.drift_schedule order by application`);
    assert.deepEqual(
      rows.map((r) => r.application),
      [...apps].sort(),
    );
    // No server looked at a deploy another one ran (each of the later deploys gave it time to).
    for (const [id, runner] of Object.entries(ran))
      for (const [name, server] of Object.entries(servers))
        if (name !== runner)
          assert.equal(
            server
              .logs()
              .split("\n")
              .find((l) => looked(id).test(l)),
            undefined,
            `${name} looked at ${id}`,
          );
  });
});
