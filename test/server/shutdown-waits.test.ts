import assert from "node:assert/strict";
import { ManentError } from "../../src/core/errors.js";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { ApiClient } from "../../src/cli/api-client.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Resolves once the deploy waits at a gate of this kind. */
async function waitingAt(api: ApiClient, id: string, kind: string): Promise<void> {
  for (;;) {
    const d = await api.deploy(id);
    if (d.rollout?.waiting?.kind === kind) return;
    assert.ok(!["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status), `deploy ended (${d.status}) before its ${kind}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Sends a rollout command once the deploy waits for it. A workflow the new server resumes rewrites
 * its rollout state from its checkpoints, and a command sent in that moment is refused as "not
 * paused" / "not waiting" (a known race, in the notes of issue 22): wait until it waits again, and
 * send again.
 */
async function sendOnceWaiting(api: ApiClient, id: string, command: "promote" | "approve", kind: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await api.rolloutCommand(id, command);
      return;
    } catch (err) {
      if (attempt >= 20 || !(err instanceof ManentError) || !/is not (paused|waiting)/.test(err.message)) throw err;
      await waitingAt(api, id, kind);
    }
  }
}

/**
 * Issue 20, item 4: a server stopped while its deploys wait on an open-ended pause or an approval
 * does not wait `shutdown_timeout` (ten minutes here) for them: it stops at once, and the next
 * server resumes the waits (the deadlines and the position of each rollout are recorded).
 */
describe("shutdown during durable waits", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "v2\n");
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { shutdown_timeout: "10m" }));
    for (const [app, rollout] of [
      ["paused", { canary: { steps: [{ set_weight: 50 }, { pause: {} }, { set_weight: 100 }] } }],
      ["approved", { waves: { by: ["region"], between: [{ approval: {} }] } }],
    ] as const) {
      await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
        plugin: "noop",
        targets: ["eu-1", "us-1"].map((h) => ({ host: `${app}-${h}`, labels: { region: h.slice(0, 2) } })),
        params: { state_dir: ws.path("state"), journal: ws.path("journal") },
        rollout,
      });
    }
  });
  after(async () => pg?.stop());

  it("stops at once, without waiting shutdown_timeout; the next server resumes the waits", async () => {
    const first = await startServer(config, { cwd: ws.dir });
    let paused: string;
    let approved: string;
    try {
      paused = (await first.api.submit({ descriptor: descriptor("paused", "prod", artifact, "2.0.0") })).id;
      approved = (await first.api.submit({ descriptor: descriptor("approved", "prod", artifact, "2.0.0") })).id;
      await waitingAt(first.api, paused, "pause");
      await waitingAt(first.api, approved, "approval");
    } catch (err) {
      await first.kill();
      throw err;
    }
    // With shutdown_timeout at 10 minutes, a stop that waited for them would outlast the test.
    await first.stop();
    assert.equal((await first.exited).code, 0, first.logs().slice(-3000));
    assert.match(first.logs(), /not waiting for the deploys that wait on a pause, an approval or an analysis interval/);

    const second = await startServer(config, { cwd: ws.dir });
    try {
      await waitingAt(second.api, paused, "pause");
      await waitingAt(second.api, approved, "approval");
      await sendOnceWaiting(second.api, paused, "promote", "pause");
      await sendOnceWaiting(second.api, approved, "approve", "approval");
      assert.equal((await second.api.deploy(paused, 120)).status, "succeeded");
      assert.equal((await second.api.deploy(approved, 120)).status, "succeeded");
    } finally {
      await second.stop();
    }
  });
});

// Under load (found with the suite at three files at once), an approval's wait woke after the
// stop had shut DBOS down but before the process ended (its look for a command, every second),
// failed on DBOS being stopped, and the deploy was recorded failed: a graceful restart ended it.
describe("a wait woken after the stop shut DBOS down", () => {
  let pg: TestPostgres;
  // Killed after the tests also when one timed out (a held server would keep the file running).
  const servers: ServerProcess[] = [];
  before(async () => {
    pg = await TestPostgres.start();
  });
  after(async () => {
    for (const server of servers) await server.kill();
    await pg?.stop();
  });

  // Without a "left" line (the run recording its end, or failing on DBOS stopped before it could),
  // stopHeldAfterDbos never returns: the timeouts make that a failure in minutes, not the runner's 15.
  it("a deploy's approval records nothing: the next server resumes it", { timeout: 180_000 }, async () => {
    const ws = await createWorkspace();
    const artifact = await ws.write("dist/app.txt", "v3\n");
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
    await ws.write("envconfig/untenanted/woken/woken/prod.yml", {
      plugin: "noop",
      targets: ["eu-1", "us-1"].map((h) => ({ host: `woken-${h}`, labels: { region: h.slice(0, 2) } })),
      params: { state_dir: ws.path("state") },
      rollout: { waves: { by: ["region"], between: [{ approval: {} }] } },
    });
    const first = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_PAUSE_AT: "shutdown:stopped" } });
    servers.push(first);
    const { id } = await first.api.submit({ descriptor: descriptor("woken", "prod", artifact, "3.0.0") });
    await waitingAt(first.api, id, "approval");
    assert.equal(await stopHeldAfterDbos(first, "deploy"), "left");
    assert.equal((await first.exited).code, 0, first.logs().slice(-3000));

    const second = await startServer(config, { cwd: ws.dir });
    servers.push(second);
    await waitingAt(second.api, id, "approval");
    await sendOnceWaiting(second.api, id, "approve", "approval");
    const done = await second.api.deploy(id, 120);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    await second.stop();
  });

  it("a release's approval records nothing: the next server resumes it", { timeout: 180_000 }, async () => {
    const ws = await createWorkspace();
    const artifact = await ws.write("dist/app.txt", "v1\n");
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
    await ws.write("envconfig/untenanted/piped/piped/prod.yml", {
      plugin: "noop",
      targets: [{ host: "piped-1" }],
      params: { state_dir: ws.path("state") },
    });
    await ws.write("envconfig/untenanted/piped/pipeline.yml", { stages: [{ environment: "prod", approval: {} }] });
    const first = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_PAUSE_AT: "shutdown:stopped" } });
    servers.push(first);
    const { id } = await first.api.startRelease({
      descriptor: descriptor("piped", "prod", artifact, "1.0.0"),
      descriptor_file: "piped.yml",
    });
    await releaseWaiting(first.api, id);
    assert.equal(await stopHeldAfterDbos(first, "release"), "left");
    assert.equal((await first.exited).code, 0, first.logs().slice(-3000));

    const second = await startServer(config, { cwd: ws.dir });
    servers.push(second);
    await releaseWaiting(second.api, id);
    await second.api.releaseCommand(id, "approve");
    for (;;) {
      const r = await second.api.release(id);
      if (r.status !== "running") {
        assert.equal(r.status, "succeeded", JSON.stringify(r.error));
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await second.stop();
  });
});

/**
 * Stops a server started with `MANENT_FAULT_PAUSE_AT=shutdown:stopped`, held there, after DBOS's
 * shutdown and before its process ends: its waiting deploy or release looks for a command within
 * a second and finds DBOS stopped. What that run logged: "left" when it stopped recording nothing.
 */
async function stopHeldAfterDbos(server: ServerProcess, what: "deploy" | "release"): Promise<string> {
  const held = server.logged(/fault point shutdown:stopped: paused/);
  const stopped = server.stop();
  await held;
  const outcome = await Promise.race([
    server.logged(new RegExp(`"msg":"${what} left to the next start: the server stopped while it waited"`)).then(
      () => "left",
      () => "not logged",
    ),
    server.logged(new RegExp(`"msg":"${what} finished"`)).then(
      (line) => `finished: ${line}`,
      () => "not logged",
    ),
  ]);
  server.child.kill("SIGUSR2");
  await stopped;
  return outcome;
}

/** Resolves once the release waits for its approval. */
async function releaseWaiting(api: ApiClient, id: string): Promise<void> {
  for (;;) {
    const r = await api.release(id);
    if (r.waiting?.kind === "approval") return;
    assert.equal(r.status, "running", `release ended (${r.status}) before its approval`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Issue 20, item 4: the embedded Postgres ends with its server, also when the server is SIGKILLed. */
describe("the embedded Postgres after its server's SIGKILL", () => {
  it("stops, and the next start finds none left running", async () => {
    const ws = await createWorkspace();
    const config = await ws.write("manent.yml", manentYml(undefined));
    const server = await startServer(config, { cwd: ws.dir });
    const pid = Number((await readFile(ws.path("work", "postgres", "data", "postmaster.pid"), "utf8")).split("\n")[0]);
    assert.ok(alive(pid));
    await server.kill();
    // The kernel tells the postmaster at once; its fast shutdown takes a moment.
    for (let i = 0; i < 600 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!alive(pid), `the embedded Postgres (pid ${pid}) outlived its SIGKILLed server`);
    const next = await startServer(config, { cwd: ws.dir });
    await next.stop();
    assert.doesNotMatch(next.logs(), /left running by a previous server/);
  });
});

/** Running (a zombie no init process has reaped yet is not). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
