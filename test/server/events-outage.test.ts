import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { isFinishEvent, type DeployEvent } from "../../src/core/engine/deploy-events.js";
import { collect, type Collected } from "../support/event-stream.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * The event hub's LISTEN connection across a Postgres restart: the embedded Postgres is SIGKILLed
 * and restarted by the server, and an event stream opened before keeps delivering, over the same
 * HTTP response, the events of deploys submitted after it (the hub listens again and catches up).
 */
describe("event streams across a Postgres restart", () => {
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  let events: Collected;

  before(async () => {
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
    });
    server = await startServer(await ws.write("manent.yml", manentYml(undefined)), { cwd: ws.dir });
  });
  after(async () => {
    await events?.stop();
    await server?.stop();
  });

  const submit = async (version: string): Promise<string> => {
    for (;;) {
      try {
        return (await server.api.submit({ descriptor: descriptor("shop", "prod", artifact, version), descriptor_file: "shop.yml" })).id;
      } catch (err) {
        // 503 while the database is away: a client submits again.
        assert.match((err as Error).message, /database unavailable|cannot reach|starting/, String(err));
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };
  const finished = (id: string) => (e: DeployEvent) => e.deploy_id === id && isFinishEvent(e);

  it("keeps one SSE stream delivering after the postmaster is SIGKILLed and restarted, and the server logs no unhandled connection error", async () => {
    events = collect(server.url, "", "/api/v1/events");
    await events.opened;
    const before = await submit("1.0.0");
    await events.waitFor(finished(before));

    const dataDir = ws.path("work", "postgres", "data");
    const postmaster = Number((await readFile(`${dataDir}/postmaster.pid`, "utf8")).split("\n")[0]);
    process.kill(postmaster, "SIGKILL");
    const restarted = /the embedded Postgres restarted/;
    while (!restarted.test(server.logs())) await new Promise((r) => setTimeout(r, 100));

    const afterRestart = await submit("2.0.0");
    const end = await Promise.race([
      events.waitFor(finished(afterRestart)),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 60_000).unref()),
    ]);
    assert.ok(
      end,
      `no finish event for ${afterRestart} on the stream opened before the restart; server log (end):\n${server.logs().slice(-5000)}`,
    );
    assert.equal(end.data.status, "succeeded");
    const types = events.events.filter((e) => e.deploy_id === afterRestart).map((e) => e.type);
    assert.equal(types[0], "deploy.created", types.join(","));
    assert.match(server.logs(), /event listener connection lost; reconnecting/);
    // Every connection has its error listener: none surfaced as the process's uncaught exception.
    assert.doesNotMatch(server.logs(), /"database connection lost"/);
  });
});
