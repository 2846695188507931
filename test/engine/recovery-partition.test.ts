import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { readJournal, type JournalEntry } from "../support/journal.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A deploy whose server is SIGKILLed goes back to the deploy queue through DBOS's recovery (at the
 * server's next start, or by a peer's takeover). It must go back to its own partition, ahead of
 * the newer deploy of the same application queued behind it: the two never run at the same time,
 * and the older one finishes first.
 */
describe("recovered deploys keep their place in their partition", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let artifact: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "recovery\n");
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await pgServer?.stop();
  });

  const envconfig = (app: string) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }, { host: `${app}-2` }],
      params: { state_dir: ws.path(`state-${app}`), journal: ws.path(`journal-${app}`), delay: "600ms" },
    });
  const start = async (databaseUrl: string, executor: string, extra: Record<string, unknown> = {}) => {
    const config = await ws.write(
      `${executor}.yml`,
      manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: executor, ...extra }, workdir: `./work-${executor}` }),
    );
    const s = await startServer(config, { cwd: ws.dir });
    servers.push(s);
    return s;
  };
  const kill = async (s: ServerProcess) => {
    await s.kill();
    servers.splice(servers.indexOf(s), 1);
  };
  const journalOf = (app: string) => readJournal(ws.path(`journal-${app}`));
  const until = async (what: string, ok: () => Promise<boolean>) => {
    const deadline = Date.now() + 60_000;
    while (!(await ok())) {
      if (Date.now() > deadline) assert.fail(`never happened: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const workflow = async (databaseUrl: string, id: string) => {
    const db = new pg.Client(databaseUrl);
    await db.connect();
    try {
      return (
        await db.query<{ status: string; executor_id: string; queue_name: string | null; queue_partition_key: string | null }>(
          "select status, executor_id, queue_name, queue_partition_key from dbos.workflow_status where workflow_uuid = $1",
          [id],
        )
      ).rows[0]!;
    } finally {
      await db.end();
    }
  };
  /** The older deploy's calls all come before the newer one's first: they never overlapped. */
  const assertInOrder = (journal: JournalEntry[], older: string, newer: string) => {
    const lastOlder = journal.map((j) => j.deployment).lastIndexOf(older);
    const firstNewer = journal.findIndex((j) => j.deployment === newer);
    assert.ok(lastOlder >= 0 && firstNewer >= 0, JSON.stringify(journal));
    assert.ok(
      lastOlder < firstNewer,
      `deploy ${newer} ran while the recovered ${older} was running:\n${journal.map((j) => `${j.deployment === older ? "older" : "newer"} ${j.call}`).join("\n")}`,
    );
    assert.equal(journal.filter((j) => j.deployment === older && j.call === "deploy_end").length, 1, "the recovered deploy finished once");
  };

  /** Submits an older deploy, waits for its deploy call, queues a newer one behind it; returns both ids. */
  const olderAndNewer = async (s: ServerProcess, app: string) => {
    const older = (await s.api.submit({ descriptor: descriptor(app, "prod", artifact, "1.0.0"), descriptor_file: `${app}.yml` })).id;
    await until(`${older}'s deploy call`, async () => (await journalOf(app)).some((j) => j.deployment === older && j.call === "deploy"));
    const newer = await s.api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` });
    assert.equal(newer.queued_behind, older);
    return { older, newer: newer.id };
  };

  it("at the server's next start", async () => {
    const databaseUrl = await pgServer.createDatabase();
    await envconfig("restart");
    const first = await start(databaseUrl, "solo");
    const { older, newer } = await olderAndNewer(first, "restart");
    await kill(first);
    const before = await workflow(databaseUrl, older);
    assert.equal(before.status, "PENDING");

    const second = await start(databaseUrl, "solo");
    const recovered = await workflow(databaseUrl, older);
    assert.equal(recovered.queue_name, "manent-deploys");
    assert.equal(recovered.queue_partition_key, "untenanted/restart/restart/prod");
    assert.equal((await second.api.deploy(older, 60)).status, "succeeded");
    assert.equal((await second.api.deploy(newer, 60)).status, "succeeded");
    assertInOrder(await journalOf("restart"), older, newer);
  });

  it("taken over by a peer", async () => {
    const databaseUrl = await pgServer.createDatabase();
    await envconfig("takeover");
    const fleet = { heartbeat_interval: "250ms", dead_after: "2s" };
    const alpha = await start(databaseUrl, "alpha", fleet);
    const beta = await start(databaseUrl, "beta", fleet);
    const { older, newer } = await olderAndNewer(alpha, "takeover");
    const runner = (await workflow(databaseUrl, older)).executor_id;
    const [dead, survivor] = runner === "alpha" ? [alpha, beta] : [beta, alpha];
    await kill(dead);

    assert.equal((await survivor.api.deploy(older, 120)).status, "succeeded");
    assert.equal((await survivor.api.deploy(newer, 60)).status, "succeeded");
    const recovered = await workflow(databaseUrl, older);
    assert.equal(recovered.queue_partition_key, "untenanted/takeover/takeover/prod");
    assertInOrder(await journalOf("takeover"), older, newer);
  });
});
