import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { startServer } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const terminal = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);

/**
 * Servers killed with SIGKILL in the middle of submissions: no record is left without its
 * workflow, every acknowledged or recorded deploy ends, and `queued_behind` names a deploy that
 * really runs before the caller's.
 */
describe("submissions cut by a crash", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let artifact: string;

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
  });
  after(async () => pgServer?.stop());

  async function envconfig(app: string, delay = "50ms"): Promise<void> {
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), delay },
    });
  }

  async function allRecords(url: string): Promise<{ id: string; status: string }[]> {
    const client = new pg.Client(url);
    await client.connect();
    try {
      return (await client.query<{ id: string; status: string }>("select id, status from manent.deploys")).rows;
    } finally {
      await client.end();
    }
  }

  it("a kill between queueing the workflow and writing its record: the workflow records itself and runs", async () => {
    const db = await pgServer.createDatabase();
    const config = await ws.write("cut.yml", manentYml(db));
    await envconfig("cut");
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "submit:after" } });
    await assert.rejects(doomed.api.submit({ descriptor: descriptor("cut", "prod", artifact), descriptor_file: "cut.yml" }));
    assert.equal((await doomed.exited).signal, "SIGKILL");
    const server = await startServer(config, { cwd: ws.dir });
    try {
      // The answer never reached the client; the deploy shows up by itself and completes.
      let listed = (await server.api.list({ application: "cut" })).deploys;
      while (listed.length === 0) listed = (await server.api.list({ application: "cut" })).deploys;
      assert.equal(listed.length, 1);
      assert.equal((await server.api.deploy(listed[0]!.id, 60)).status, "succeeded");
    } finally {
      await server.stop();
    }
  });

  /** The input of the one queued deploy workflow, as DBOS keeps it (manent's serializer: plain JSON as its text). */
  const workflowInput = async (client: pg.Client) => {
    const { rows } = await client.query<{ workflow_uuid: string; inputs: string }>(
      `select i.workflow_uuid, i.inputs from dbos.workflow_input i join dbos.workflow_status s using (workflow_uuid) where s.name = 'manent.deploy'`,
    );
    assert.equal(rows.length, 1);
    const args = JSON.parse(rows[0]!.inputs) as [Record<string, any>];
    return { id: rows[0]!.workflow_uuid, args, input: args[0] };
  };

  it("the record a workflow writes itself is rebuilt from its input, which carries the submission once; an older server's input with the whole record still runs", async () => {
    for (const shape of ["this version's", "an older server's"]) {
      const db = await pgServer.createDatabase();
      const config = await ws.write("shape.yml", manentYml(db));
      await envconfig("shape");
      const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "submit:after" } });
      const submitted = { descriptor: descriptor("shape", "prod", artifact, "2.0.0"), descriptor_file: "shape.yml" };
      await assert.rejects(doomed.api.submit(submitted));
      assert.equal((await doomed.exited).signal, "SIGKILL");
      const client = new pg.Client(db);
      await client.connect();
      const { id, args, input } = await workflowInput(client);
      // The submission once, with its pinned settings; the record only what the submission does not say.
      assert.equal(input.submission.descriptorFile, "shape.yml");
      assert.equal(input.submission.resolved.plugin, "noop");
      assert.deepEqual(Object.keys(input.record).sort(), [
        "application",
        "artifact",
        "environment",
        "kind",
        "submittedBy",
        "submittedById",
        "tenant",
        "version",
      ]);
      if (shape === "an older server's") {
        // As servers before this change queued it: the record whole, the submission again as its
        // request, in DBOS's envelope.
        const { resolved, windowed: _windowed, ...request } = input.submission;
        input.record = { id, ...input.record, request, envconfig: resolved.envconfigOrigin };
        await client.query(`update dbos.workflow_input set inputs = $2 where workflow_uuid = $1`, [
          id,
          JSON.stringify({ json: args, __dbos_serializer: "superjson" }),
        ]);
      }
      await client.end();
      const server = await startServer(config, { cwd: ws.dir });
      try {
        const d = await server.api.deploy(id, 60);
        assert.equal(d.status, "succeeded", `${shape} input: ${JSON.stringify(d.error)}`);
        assert.deepEqual(
          { version: d.version, submitted_by: d.submitted_by, submitted_by_id: d.submitted_by_id, envconfig: d.envconfig?.path },
          {
            version: "2.0.0",
            submitted_by: "anonymous",
            submitted_by_id: "anonymous",
            envconfig: "./envconfig/untenanted/shape/shape/prod.yml",
          },
          shape,
        );
        assert.deepEqual(
          d.request,
          { kind: "deploy", descriptor: submitted.descriptor, descriptorFile: "shape.yml", overrides: {} },
          `${shape} input: the record's request is the submission as submitted`,
        );
      } finally {
        await server.stop();
      }
    }
  });

  it("a record left by an older server without its workflow is ended at start-up, with a message", async () => {
    const db = await pgServer.createDatabase();
    const config = await ws.write("orphan.yml", manentYml(db));
    await envconfig("orphan");
    const first = await startServer(config, { cwd: ws.dir });
    await first.stop();
    const client = new pg.Client(db);
    await client.connect();
    const id = "00000000-0000-4000-8000-000000000001";
    await client.query(
      `insert into manent.deploys (id, kind, tenant, application, artifact, environment, version, status, request)
       values ($1, 'deploy', 'untenanted', 'orphan', 'orphan', 'prod', '1.0.0', 'queued', '{}')`,
      [id],
    );
    await client.end();
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const d = await server.api.deploy(id);
      assert.equal(d.status, "failed");
      assert.match(d.error!.message, /before its workflow was queued; nothing ran: submit it again/);
      // A later deploy of that application is not reported as queued behind the ghost.
      const next = await server.api.submit({ descriptor: descriptor("orphan", "prod", artifact), descriptor_file: "orphan.yml" });
      assert.equal(next.queued_behind, undefined);
      assert.equal((await server.api.deploy(next.id, 60)).status, "succeeded");
    } finally {
      await server.stop();
    }
  });

  // Rounds of concurrent submissions, the server killed as soon as `killAfter` of them were acknowledged.
  const rounds = [1, 3, 5, 2, 7, 4];
  it(`${rounds.length} rounds of 8 submissions cut by SIGKILL: every acknowledged or recorded deploy ends`, async () => {
    const db = await pgServer.createDatabase();
    const config = await ws.write("rounds.yml", manentYml(db));
    const acknowledged: string[] = [];
    for (const [round, killAfter] of rounds.entries()) {
      const apps = Array.from({ length: 8 }, (_, i) => `r${round}-${i}`);
      for (const app of apps) await envconfig(app);
      const doomed = await startServer(config, { cwd: ws.dir });
      let acks = 0;
      const submissions = apps.map((app) =>
        doomed.api.submit({ descriptor: descriptor(app, "prod", artifact), descriptor_file: `${app}.yml` }).then(({ id }) => {
          acknowledged.push(id);
          if (++acks === killAfter) void doomed.kill();
        }),
      );
      await Promise.allSettled(submissions);
      await doomed.kill();
    }
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const records = await allRecords(db);
      const ids = new Set(records.map((r) => r.id));
      for (const id of acknowledged) assert.ok(ids.has(id), `acknowledged deploy ${id} has no record`);
      const ended = await Promise.all(records.map((r) => server.api.deploy(r.id, 120)));
      const stuck = ended.filter((d) => !terminal.has(d.status));
      assert.deepEqual(
        stuck.map((d) => `${d.id}: ${d.status}`),
        [],
      );
      // Every deploy that has a record had its workflow: none ended as an orphan.
      const orphans = ended.filter((d) => d.error?.message.includes("before its workflow was queued"));
      assert.deepEqual(
        orphans.map((d) => d.id),
        [],
      );
      assert.ok(
        ended.every((d) => d.status === "succeeded"),
        JSON.stringify(ended.filter((d) => d.status !== "succeeded").map((d) => d.error)),
      );
    } finally {
      await server.stop();
    }
  });

  it("queued_behind names a deploy that runs before the caller's, never one behind it", async () => {
    const db = await pgServer.createDatabase();
    const config = await ws.write("behind.yml", manentYml(db));
    await envconfig("line", "150ms");
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          server.api.submit({ descriptor: descriptor("line", "prod", artifact, `1.0.${i}`), descriptor_file: "line.yml" }),
        ),
      );
      const deploys = new Map((await Promise.all(answers.map((a) => server.api.deploy(a.id, 120)))).map((d) => [d.id, d]));
      let named = 0;
      for (const a of answers) {
        if (!a.queued_behind) continue;
        named++;
        const mine = deploys.get(a.id)!;
        const ahead = deploys.get(a.queued_behind);
        assert.ok(ahead, `queued_behind ${a.queued_behind} is not one of this application's deploys`);
        assert.ok(
          Date.parse(ahead.finished_at!) <= Date.parse(mine.started_at!),
          `${a.id} was said to be behind ${a.queued_behind}, which ran after it`,
        );
      }
      // All but the first (and any queued in the same millisecond as the one before) wait for another.
      assert.ok(named >= 6, `only ${named} of 12 answers named a deploy ahead`);
    } finally {
      await server.stop();
    }
  });
});
