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
