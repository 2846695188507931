import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Deploy ids a server's log says it finished: which server ran which workflow. */
function finishedBy(server: ServerProcess): Set<string> {
  const ids = new Set<string>();
  for (const line of server.logs().split("\n")) {
    if (!line.includes('"deploy finished"')) continue;
    const entry = JSON.parse(line) as { deploy?: string };
    if (entry.deploy) ids.add(entry.deploy);
  }
  return ids;
}

/** Two manent-server processes with their own executor ids on one Postgres database share the work. */
describe("scale-out", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let servers: ServerProcess[] = [];
  let artifact: string;

  const journal = () => readJournal(ws.path("journal"));
  const envconfig = (app: string, delay: string) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay },
    });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "scale\n");
    const databaseUrl = await pg.createDatabase();
    // One after the other: the first creates the schema, the second finds it. worker-1 is sized to
    // run 5 deploys and hold none waiting (max_waiting 0); worker-2, registered last, keeps the
    // default max_waiting, and DBOS's shared queue row then says 1005: each server must still
    // claim by its own.
    const sizes = { "worker-1": { concurrency: 5, max_waiting: 0 }, "worker-2": { concurrency: 5 } };
    for (const [executor, size] of Object.entries(sizes)) {
      const config = await ws.write(
        `${executor}.yml`,
        manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: executor }, workdir: `./work-${executor}`, ...size }),
      );
      servers.push(await startServer(config, { cwd: ws.dir }));
    }
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    servers = [];
    await pg?.stop();
  });

  it("runs 10 deploys on both servers, each deploy call once: a server sized to 5 leaves the rest to the other", async () => {
    const apps = Array.from({ length: 10 }, (_, i) => `scale-${i}`);
    // Two targets of 1 s each: worker-1's first five still run when worker-2 next polls the queue (every second).
    for (const app of apps) await envconfig(app, "1s");
    const ids = await Promise.all(
      apps.map(
        async (app) =>
          (await servers[0]!.api.submit({ descriptor: descriptor(app, "prod", artifact, "4.0.0"), descriptor_file: `${app}.yml` })).id,
      ),
    );
    // Either server answers for any deploy: the records are shared.
    const deploys = await Promise.all(ids.map((id, i) => servers[(i + 1) % 2]!.api.deploy(id, 120)));
    assert.deepEqual(
      deploys.map((d) => d.status),
      apps.map(() => "succeeded"),
    );

    const calls = await journal();
    for (const id of ids) assert.equal(calls.filter((c) => c.deployment === id && c.call === "deploy").length, 1, `deploy calls of ${id}`);
    for (const app of apps) assert.equal(await readFile(ws.path("state", `${app}-2.release`), "utf8"), "4.0.0");

    const [one, two] = servers.map(finishedBy);
    for (const id of ids) assert.ok(one!.has(id) !== two!.has(id), `deploy ${id} finished by exactly one server`);
    const counts = [ids.filter((id) => one!.has(id)).length, ids.filter((id) => two!.has(id)).length];
    // worker-1 took at most its 5 before one ended (2 s); worker-2 polled meanwhile and took the rest.
    assert.ok(counts[0]! > 0 && counts[1]! > 0, `both servers should run some deploys, ran ${counts.join(" and ")}`);
  });

  it("never overlaps two deploys of one application and environment submitted to different servers", async () => {
    await envconfig("shared", "600ms");
    for (let round = 0; round < 2; round++) {
      const [a, b] = await Promise.all(
        servers.map((s, i) =>
          s.api.submit({ descriptor: descriptor("shared", "prod", artifact, `${round}.${i}.0`), descriptor_file: "shared.yml" }),
        ),
      );
      const [da, db] = await Promise.all([servers[1]!.api.deploy(a!.id, 120), servers[0]!.api.deploy(b!.id, 120)]);
      assert.equal(da.status, "succeeded", JSON.stringify(da.error));
      assert.equal(db.status, "succeeded", JSON.stringify(db.error));
      const [first, second] = [da, db].sort((x, y) => Date.parse(x.started_at!) - Date.parse(y.started_at!));
      assert.ok(
        Date.parse(second!.started_at!) >= Date.parse(first!.finished_at!),
        `second started ${second!.started_at} before first finished ${first!.finished_at}`,
      );
      // The plugin saw them one after the other too: the later deploy's version is what stays.
      assert.equal(await readFile(ws.path("state", "shared-1.release"), "utf8"), second!.version);
    }
  });
});
