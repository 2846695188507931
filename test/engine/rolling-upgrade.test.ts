import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import type { ReleaseRecord } from "../../src/core/release/release-store.js";
import { TestPostgres } from "../support/postgres.js";
import { until } from "../support/until.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A rolling upgrade: a server of one build (application version "old", executor alpha) and one of
 * the next ("new", executor beta) on one database at once. Each goes on with what it started, takes
 * commands for the other's, and runs what is queued by the rule of docs/operations/database.md; a
 * dead newer server is not taken over by an older one, and an older server started in its place (a
 * downgrade) leaves its canary alone with one line, which the newer build then finishes.
 */
describe("rolling upgrade: an old and a new server on one database", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let databaseUrl: string;
  let db: pg.Client;
  const servers: ServerProcess[] = [];
  const everyServer: ServerProcess[] = [];

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    databaseUrl = await pgServer.createDatabase({ empty: true });
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await db?.end();
    await pgServer?.stop();
  });

  const start = async (executor: string, version: string): Promise<ServerProcess> => {
    const s = await startServer(ws.path(`${executor}.yml`), { cwd: ws.dir, env: { MANENT_APPLICATION_VERSION: version } });
    servers.push(s);
    everyServer.push(s);
    return s;
  };
  const stop = async (s: ServerProcess, how: "stop" | "kill" = "stop"): Promise<void> => {
    await s[how]();
    servers.splice(servers.indexOf(s), 1);
  };
  const workflow = async (id: string) =>
    (
      await db.query<{ application_version: string; executor_id: string; status: string }>(
        "select application_version, executor_id, status from dbos.workflow_status where workflow_uuid = $1",
        [id],
      )
    ).rows[0];
  const paused = (d: DeployRecord) => (d.rollout?.waiting ?? null) !== null || !["running", "queued"].includes(d.status);

  it("each server goes on with its own; queued work moves to the new build; an older server leaves a newer one's canary alone", async () => {
    const artifact = await ws.write("dist/app.txt", "rolling\n");
    const params = { state_dir: ws.path("state"), journal: ws.path("journal") };
    await ws.write("envconfig/untenanted/canaried/canaried/prod.yml", {
      plugin: "noop",
      targets: [{ host: "canaried-1" }],
      params,
      rollout: { canary: { steps: [{ set_weight: 25 }, { pause: {} }, { set_weight: 100 }] } },
    });
    for (const e of ["dev", "staging"])
      await ws.write(`envconfig/untenanted/cart/cart/${e}.yml`, { plugin: "noop", targets: [{ host: `cart-${e}-1` }], params });
    await ws.write("envconfig/untenanted/cart/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }],
    });
    for (const executor of ["alpha", "beta"])
      await ws.write(
        `${executor}.yml`,
        manentYml(undefined, {
          dbos: { database_url: databaseUrl, executor_id: executor, heartbeat_interval: "250ms", dead_after: "2s" },
          workdir: `./work-${executor}`,
        }),
      );
    db = new pg.Client(databaseUrl);
    await db.connect();

    // The old build alone: a canary paused, a deploy queued behind it, a release waiting at a promotion.
    const oldServer = await start("alpha", "old");
    const submit = (s: ServerProcess, app: string, version: string) =>
      s.api.submit({ descriptor: descriptor(app, "prod", artifact, version), descriptor_file: `${app}.yml` });
    const { id: canary1 } = await submit(oldServer, "canaried", "2.0.0");
    await until(() => oldServer.api.deploy(canary1), paused, "the old server's canary pauses");
    const queued = await submit(oldServer, "canaried", "2.1.0");
    assert.equal(queued.queued_behind, canary1);
    const { id: release } = await oldServer.api.startRelease({
      descriptor: descriptor("cart", "dev", artifact, "3.0.0"),
      descriptor_file: "cart.yml",
    });
    await until(
      () => oldServer.api.release(release),
      (r: ReleaseRecord) => r.waiting?.kind === "promotion" || r.status !== "running",
      "the old server's release waits",
    );

    // The new build joins. The old server is alive: what it started stays its own, still waiting.
    const newServer = await start("beta", "new");
    const requeued = newServer
      .logs()
      .split("\n")
      .filter((l) => l.includes("queued under this one"));
    assert.equal(requeued.length, 1, requeued.join("\n"));
    assert.match(requeued[0]!, new RegExp(`"deploy":"${queued.id}".*"was_version":"old"`));
    assert.equal((await workflow(queued.id))?.application_version, "new", "the queued deploy is the new build's now");
    const c1 = await newServer.api.deploy(canary1);
    assert.equal(c1.status, "running");
    assert.notEqual(c1.rollout?.waiting ?? null, null, "still paused");
    assert.equal((await newServer.api.release(release)).waiting?.kind, "promotion");
    assert.doesNotMatch(newServer.logs(), /another manent version ended/, "a live server's work is not settled");

    // Commands through either server reach the workflow of the other build.
    await newServer.api.rolloutCommand(canary1, "promote", true);
    assert.equal((await oldServer.api.deploy(canary1, 60)).status, "succeeded");
    // The record ends in the workflow's last step; DBOS marks the workflow SUCCESS as it returns, a moment later.
    const ended = (w: { status: string } | undefined) => w?.status !== "PENDING";
    assert.deepEqual(await until(() => workflow(canary1), ended, "canary1's workflow ends"), {
      application_version: "old",
      executor_id: "alpha",
      status: "SUCCESS",
    });
    await until(() => oldServer.api.deploy(queued.id), paused, "the requeued deploy runs and pauses");
    await oldServer.api.rolloutCommand(queued.id, "promote", true);
    assert.equal((await newServer.api.deploy(queued.id, 60)).status, "succeeded");
    assert.deepEqual(await until(() => workflow(queued.id), ended, "the requeued deploy's workflow ends"), {
      application_version: "new",
      executor_id: "beta",
      status: "SUCCESS",
    });
    await newServer.api.releaseCommand(release, "promote", "staging");
    const r = await until(
      () => oldServer.api.release(release),
      (x: ReleaseRecord) => x.status !== "running",
      "the old server's release ends",
    );
    assert.equal(r.status, "succeeded", JSON.stringify(r.error));
    assert.equal((await workflow(release))?.executor_id, "alpha");

    // The new server dies with a canary paused. The old one, alive, must not take it over: its
    // DBOS would not recover another version's workflow, and the canary would be stranded.
    const { id: canary2 } = await submit(newServer, "canaried", "4.0.0");
    await until(() => newServer.api.deploy(canary2), paused, "the new server's canary pauses");
    assert.equal((await workflow(canary2))?.application_version, "new");
    await stop(newServer, "kill");
    const beat = async () =>
      Object.fromEntries(
        (
          await db.query<{ executor_id: string; heartbeat_at: Date; taken_over_by: string | null }>("select * from manent.servers")
        ).rows.map((row) => [row.executor_id, row]),
      );
    const lastOfBeta = (await beat()).beta!.heartbeat_at.getTime();
    // Past dead_after (2 s) and several of the old server's heartbeats (and takeover looks) later.
    const seen = await until(beat, (b) => b.alpha!.heartbeat_at.getTime() > lastOfBeta + 3_500, "the old server beats on");
    assert.ok(seen.beta, "the dead newer server was taken over by the older one (its row is gone)");
    assert.equal(seen.beta.taken_over_by, null, "an older server does not claim a newer dead peer");
    assert.doesNotMatch(oldServer.logs(), /took over the pending deploys/);
    await stop(oldServer);

    // A downgrade in the dead server's place: the old build on executor beta leaves the canary alone.
    const downgraded = await start("beta", "old");
    const left = downgraded
      .logs()
      .split("\n")
      .filter((l) => l.includes("is older than the manent version"));
    assert.equal(left.length, 1, left.join("\n"));
    assert.match(
      left[0]!,
      /this server \(old\) is older than the manent version that started 1 deploy in flight \(new\): they are left alone/,
    );
    assert.match(left[0]!, /"level":40,/);
    const c2 = await downgraded.api.deploy(canary2);
    assert.equal(c2.status, "running", JSON.stringify(c2.error));
    assert.equal((await workflow(canary2))?.status, "PENDING");
    await stop(downgraded);

    // The new build again: DBOS recovers its canary, which finishes.
    const upgraded = await start("beta", "new");
    await until(() => upgraded.api.deploy(canary2), paused, "the canary is paused again");
    await upgraded.api.rolloutCommand(canary2, "promote", true);
    assert.equal((await upgraded.api.deploy(canary2, 60)).status, "succeeded");
    assert.equal(await readFile(ws.path("state", "canaried-1.release"), "utf8"), "4.0.0");
    for (const s of everyServer) assert.doesNotMatch(s.logs(), /is not available|another manent version ended/);
  });
});
