import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ApiClient } from "../../src/cli/api-client.js";
import { deployEventTypes, isFinishEvent, type DeployEvent } from "../../src/core/engine/deploy-events.js";
import { collect } from "../support/event-stream.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const token = "event-data-admin-token-0123";
const documented = deployEventTypes as Record<string, { data: readonly string[] }>;

/**
 * The event log stores less than a reader gets (no null keys; `deploy.created` only what its
 * deploy's row no longer says later): every reader (the live stream, a stream read from the
 * database, the notifications' outbox) gets each event's whole `data`, and a row stored whole (by
 * a version before) is read as it is.
 */
describe("event data: stored small, read whole", () => {
  let postgres: TestPostgres;
  let ws: Workspace;
  let databaseUrl: string;
  let pool: pg.Pool;
  const servers: ServerProcess[] = [];
  let artifact: string;

  const server = async (name: string) => {
    const config = await ws.write(
      `${name}.yml`,
      manentYml(undefined, {
        dbos: { database_url: databaseUrl, executor_id: name },
        workdir: `./work-${name}`,
        auth: { tokens: [{ name: "admin", tenant: "*", sha256: createHash("sha256").update(token).digest("hex") }] },
      }),
    );
    const s = await startServer(config, { cwd: ws.dir });
    servers.push(s);
    return s;
  };
  /** A deploy's events as a stream from `after` gives them, up to its end. */
  const streamed = async (s: ServerProcess, id: string, after?: number) => {
    const c = collect(s.url, token, `/api/v1/deploys/${id}/events`, after === undefined ? {} : { after });
    await c.waitFor(isFinishEvent);
    await c.stop();
    return c.events.map(({ receivedAt: _, ...e }) => e as DeployEvent);
  };

  /** A deploy of `app` (tenant team-a) submitted to `s`, and its events as the live stream of all events gave them, to its end. */
  const deployedLive = async (s: ServerProcess, app: string) => {
    const live = collect(s.url, token, "/api/v1/events");
    await live.opened;
    const { id } = await new ApiClient(s.url, token).submit({
      descriptor: { ...descriptor(app, "test", artifact, "1.0.0"), tenant: "team-a" },
      descriptor_file: `${app}.yml`,
    });
    await live.waitFor((e) => e.deploy_id === id && isFinishEvent(e));
    await live.stop();
    return { id, fromLive: live.events.filter((e) => e.deploy_id === id).map(({ receivedAt: _, ...e }) => e as DeployEvent) };
  };

  /**
   * A deploy's events as the database keeps them: the rows of manent.events (checked to be stored
   * small: no null key, a step's without its seq), and the ids the rows of the deploy, its steps
   * and its targets show.
   */
  const kept = async (id: string) => {
    const rows = await pool.query<{ id: string; type: string; data: Record<string, unknown> }>(
      "select e.id::text as id, e.type, e.data from manent.events e where e.deploy_id = $1 order by e.id",
      [id],
    );
    for (const r of rows.rows) {
      assert.ok(!Object.values(r.data).includes(null), `${r.type} stores a null key`);
      if (r.type.startsWith("step.")) assert.ok(!("seq" in r.data), `${r.type} stores its step's seq`);
      if (r.type === "deploy.created") assert.ok(!("id" in r.data), "deploy.created stores what its row says");
    }
    const shown = await pool.query<{ id: string }>(
      `select started_event::text as id from manent.deploy_steps where deploy_id = $1 and started_event is not null
       union all select ended_event::text from manent.deploy_steps where deploy_id = $1 and ended_event is not null
       union all select event_id::text from manent.deploy_targets where deploy_id = $1 and event_id is not null
       union all select e::text from manent.deploys, unnest(array[created_event, start_event, status_event]) as e where id = $1 and e is not null`,
      [id],
    );
    const ids = (rs: { id: string }[]) => rs.map((r) => Number(r.id)).sort((a, b) => a - b);
    return { stored: ids(rows.rows), storedTypes: rows.rows.map((r) => r.type), shown: ids(shown.rows) };
  };

  before(async () => {
    postgres = await TestPostgres.start();
    ws = await createWorkspace();
    databaseUrl = await postgres.createDatabase();
    pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    artifact = await ws.write("dist/app.txt", "event data\n");
    await ws.write("envconfig/team-a/shop/shop/test.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }, { host: "shop-2" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
    });
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await pool?.end();
    await postgres?.stop();
  });

  it("gives a new deploy's events whole, live and read from the database, and stores them small", async () => {
    const first = await server("data-1");
    const api = new ApiClient(first.url, token);
    const { id, fromLive } = await deployedLive(first, "shop");
    const record = await api.deploy(id);
    assert.equal(record.status, "succeeded");

    // Every event has exactly the keys its type documents; each of the five steps started and succeeded.
    assert.equal(fromLive.filter((e) => e.type === "step.started").length, 5);
    assert.equal(fromLive.filter((e) => e.type === "step.succeeded").length, 5);
    assert.equal(fromLive.filter((e) => e.type === "target.updated").length, 2);
    for (const e of fromLive) assert.deepEqual(Object.keys(e.data).sort(), [...documented[e.type]!.data].sort(), e.type);

    // deploy.created: the deploy as it was recorded.
    const created = fromLive[0]!;
    assert.equal(created.type, "deploy.created");
    for (const k of [
      "id",
      "kind",
      "tenant",
      "application",
      "artifact",
      "environment",
      "version",
      "submitted_by",
      "submitted_by_id",
      "retry_of",
    ] as const)
      assert.deepEqual(created.data[k], record[k], k);
    assert.deepEqual(created.data.envconfig, record.envconfig);
    assert.equal(Date.parse(created.data.created_at as string), Date.parse(record.created_at));
    assert.ok(["queued", "running"].includes(created.data.status as string));
    assert.equal(created.data.error, null);
    assert.equal(created.data.finished_at, null);
    // The end: the record's status, plugin, error and times.
    const end = fromLive.at(-1)!;
    assert.deepEqual([end.data.status, end.data.plugin, end.data.error], [record.status, record.plugin, record.error]);
    assert.equal(Date.parse(end.data.finished_at as string), Date.parse(record.finished_at!));
    for (const e of fromLive.filter((e) => e.type === "step.succeeded")) {
      assert.equal(e.data.error, null);
      assert.equal(typeof e.data.duration_ms, "number");
    }
    // Each step event's seq, stored without it, is its step's.
    const seqs = new Map(
      (await pool.query<{ name: string; seq: number }>("select name, seq from manent.deploy_steps where deploy_id = $1", [id])).rows.map(
        (r) => [r.name, r.seq],
      ),
    );
    for (const e of fromLive.filter((e) => e.type.startsWith("step.")))
      assert.equal(e.data.seq, seqs.get(e.data.name as string), `${e.type} of ${String(e.data.name)}`);
    const targets = fromLive.filter((e) => e.type === "target.updated").map((e) => e.data);
    assert.deepEqual(
      targets.map((t) => [t.host, t.status, t.error, t.details]).sort(),
      record.targets.map((t) => [t.host, t.status, t.error ?? null, t.details ?? null]).sort(),
    );

    // The events that the rows of the deploy, its steps and its targets still show are only there,
    // as ids of the log: a deploy created queued, started and ended once, of steps that ran once and
    // targets recorded once, stores none.
    const { stored, shown } = await kept(id);
    assert.deepEqual(stored, []);
    assert.deepEqual(
      shown,
      fromLive.map((e) => e.id),
    );

    // The same from the database: a server started after the deploy reads it there, not from memory.
    const second = await server("data-2");
    assert.deepEqual(await streamed(second, id), fromLive);
    assert.deepEqual(await streamed(first, id), fromLive);
  });

  it("gives each attempt of a retried step its start and end once, in order, live and read from the database", async () => {
    await ws.write("envconfig/team-a/retried/retried/test.yml", {
      plugin: "noop",
      targets: [{ host: "retried-1" }],
      params: { fail_hosts: "retried-1", fail_mode: "transient", fail_times: "2" },
      retry_interval: "10ms",
    });
    const s = servers[0]!;
    const { id, fromLive } = await deployedLive(s, "retried");
    assert.equal((await new ApiClient(s.url, token).deploy(id)).status, "succeeded");
    const deploySteps = fromLive.filter((e) => e.type.startsWith("step.") && e.data.name === "deploy");
    assert.deepEqual(
      deploySteps.map((e) => [e.type, e.data.attempt, (e.data.error as { message?: string } | null)?.message ?? null]),
      [
        ["step.started", 1, null],
        ["step.failed", 1, "target retried-1: failing as configured (call 1)"],
        ["step.started", 2, null],
        ["step.failed", 2, "target retried-1: failing as configured (call 2)"],
        ["step.started", 3, null],
        ["step.succeeded", 3, null],
      ],
    );
    // The target's result of each attempt: the first two stored when the next was recorded.
    assert.deepEqual(
      fromLive.filter((e) => e.type === "target.updated").map((e) => e.data.status),
      ["failed", "failed", "deployed"],
    );
    const ids = fromLive.map((e) => e.id);
    assert.deepEqual(
      ids,
      [...new Set(ids)].sort((a, b) => a - b),
      "each id once, in order",
    );
    for (const e of fromLive) assert.deepEqual(Object.keys(e.data).sort(), [...documented[e.type]!.data].sort(), e.type);
    // The attempts the step's row no longer shows are rows of the log (the first attempt's start
    // with them: its attempt number changed); the last attempt's end is the row's. Every event is
    // kept once, in one place or the other.
    const { stored, storedTypes, shown } = await kept(id);
    assert.deepEqual(
      stored.filter((_, i) => storedTypes[i]!.startsWith("step.")),
      deploySteps.slice(0, 5).map((e) => e.id),
    );
    assert.deepEqual(
      storedTypes.filter((t) => t === "target.updated"),
      ["target.updated", "target.updated"],
    );
    assert.deepEqual(
      [...stored, ...shown].sort((a, b) => a - b),
      ids,
    );
    // Read from the database by a server that did not see them live: the same.
    assert.deepEqual(await streamed(servers.at(-1)!, id), fromLive);
  });

  it("reads each event a row showed as it was after the row changes, and the change as one event more", async () => {
    const s = servers.at(-1)!;
    const id = (await new ApiClient(s.url, token).list({})).deploys.at(-1)!.id;
    const before = await streamed(s, id);
    const shownBefore = (await kept(id)).shown;
    // A change of the row under every event it shows: the deploy's plugin (a new deploy.status),
    // its start and finish times; a target's and a step's times.
    await pool.query(
      `update manent.deploys set plugin = 'renamed', started_at = started_at - interval '1 second',
         finished_at = finished_at + interval '1 second' where id = $1`,
      [id],
    );
    await pool.query("update manent.deploy_steps set started_at = started_at - interval '1 second' where deploy_id = $1", [id]);
    await pool.query("update manent.deploy_targets set updated_at = updated_at + interval '1 second' where deploy_id = $1", [id]);
    const after = await pool.query<{ id: string; type: string; at: Date; data: Record<string, unknown> }>(
      "select e.id::text, e.type, e.at, e.data from manent.event_log e where e.deploy_id = $1 order by e.id",
      [id],
    );
    // What the rows showed and no longer would is stored now (the deploy's two statuses, the steps'
    // starts, the targets' results); what they still show as it was (the creation, the steps' ends)
    // stays theirs, with the new status.
    const { stored, storedTypes, shown } = await kept(id);
    assert.deepEqual([...storedTypes].sort(), [
      "deploy.status",
      "deploy.status",
      ...Array(5).fill("step.started"),
      "target.updated",
      "target.updated",
    ]);
    assert.deepEqual(
      [...stored, ...shown].sort((a, b) => a - b),
      [...shownBefore, shown.at(-1)!],
    );
    assert.ok(shown.at(-1)! > shownBefore.at(-1)!);
    const last = after.rows.at(-1)!;
    assert.deepEqual([last.type, last.data.plugin, last.data.status], ["deploy.status", "renamed", before.at(-1)!.data.status]);
    assert.deepEqual(
      after.rows.slice(0, -1).map((r) => [Number(r.id), r.type, r.at.toISOString(), r.data]),
      before.map((e) => [e.id, e.type, new Date(e.at).toISOString(), e.data]),
    );
  });

  it("reads a row stored whole by an earlier version as it was stored", async () => {
    const s = servers.at(-1)!;
    const id = (await new ApiClient(s.url, token).list({})).deploys[0]!.id;
    const before = Number((await pool.query<{ id: string }>("select max(id)::text as id from manent.event_log")).rows[0]!.id);
    // Whole rows as the triggers wrote them before: every key, nulls included, with values that
    // differ from the deploy's row where one is there (what is stored is what is read).
    const old = await pool.query<{ id: string; type: string; data: Record<string, unknown> }>(
      `with d as (select * from manent.deploys where id = $1),
       rows(type, data) as (values
         ('deploy.created', (select jsonb_build_object(
           'id', d.id, 'kind', d.kind, 'tenant', d.tenant, 'application', d.application, 'artifact', d.artifact,
           'environment', d.environment, 'version', '0.9.0-as-stored', 'plugin', null, 'status', 'queued',
           'error', null, 'submitted_by', d.submitted_by, 'submitted_by_id', d.submitted_by_id, 'retry_of', d.retry_of,
           'envconfig', d.envconfig, 'created_at', d.created_at, 'started_at', null, 'finished_at', null) from d)),
         ('step.started', jsonb_build_object('name', 'resolve', 'seq', 1, 'attempt', 1, 'started_at', now())),
         ('step.failed', jsonb_build_object('name', 'resolve', 'seq', 1, 'attempt', 1, 'duration_ms', 7,
           'error', jsonb_build_object('code', 'internal', 'message', 'as stored', 'details', null))),
         ('target.updated', jsonb_build_object('phase', 'deploy', 'host', 'shop-9', 'status', 'failed', 'duration_ms', null,
           'error', 'as stored', 'details', jsonb_build_object('k', null))),
         ('deploy.status', jsonb_build_object('status', 'failed', 'error', null, 'plugin', 'noop', 'started_at', null, 'finished_at', now())))
       select manent.append_event(d.tenant, d.id, r.type, r.data)::text as id, r.type, r.data from d, rows r`,
      [id],
    );
    assert.equal(old.rows.length, 5);
    const read = await streamed(s, id, before);
    assert.deepEqual(
      read.map((e) => [e.type, e.data]),
      old.rows.sort((a, b) => Number(a.id) - Number(b.id)).map((r) => [r.type, r.data]),
    );
    for (const e of read) assert.deepEqual(Object.keys(e.data).sort(), [...documented[e.type]!.data].sort(), e.type);
  });
});
