import assert from "node:assert/strict";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { after, before, describe, it } from "node:test";
import { terminalStatuses, type DeployRecord } from "../../src/core/engine/deploy-store.js";
import { ManentError } from "../../src/core/errors.js";
import { readJournal } from "../support/journal.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** A loopback HTTP server that holds each request until the test releases it. */
class HeldRequests {
  private readonly server: Server;
  private readonly held: { req: IncomingMessage; res: ServerResponse }[] = [];
  private readonly waiters: (() => void)[] = [];
  constructor(private readonly body: string) {
    this.server = createServer((req, res) => {
      this.held.push({ req, res });
      for (const w of this.waiters.splice(0)) w();
    });
  }
  async start(): Promise<string> {
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }
  async arrived(n = 1): Promise<void> {
    while (this.held.length < n) await new Promise<void>((r) => this.waiters.push(r));
  }
  releaseAll(): void {
    for (const { res } of this.held.splice(0)) if (!res.destroyed) res.end(this.body);
  }
  close(): void {
    this.releaseAll();
    this.server.closeAllConnections();
    this.server.close();
  }
}

/**
 * A user's cancel at each point of a deploy: the final status always describes what the targets
 * run, and a cancel that comes too late is refused, saying so.
 */
describe("cancel", () => {
  let pgServer: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  const hosts = (app: string) => [`${app}-1`, `${app}-2`, `${app}-3`];
  const release = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8").catch(() => "");

  before(async () => {
    pgServer = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pgServer.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pgServer?.stop();
  });

  async function envconfig(app: string, extra: Record<string, unknown> = {}, rollback = true): Promise<void> {
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: hosts(app).map((host) => ({ host })),
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay: "300ms" },
      rollback: { enabled: rollback },
      max_retries: 0,
      ...extra,
    });
  }
  const submit = (app: string, version: string, source = artifact) =>
    server.api.submit({ descriptor: descriptor(app, "prod", source, version), descriptor_file: `${app}.yml` });
  /** Polls the deploy until `test` holds; a condition never met fails after 60 s with the record, not at the runner's timeout. */
  async function until(id: string, test: (d: DeployRecord) => boolean): Promise<DeployRecord> {
    const deadline = Date.now() + 60_000;
    let d = await server.api.deploy(id);
    while (!test(d)) {
      if (Date.now() > deadline) throw new Error(`deploy ${id}: condition not met within 60 s; last record: ${JSON.stringify(d)}`);
      await new Promise((r) => setTimeout(r, 25));
      d = await server.api.deploy(id);
    }
    return d;
  }
  const deployedTargets = (d: DeployRecord) => d.targets.filter((t) => t.phase === "deploy" && t.status === "deployed").length;

  it("a queued deploy is cancelled at once and never runs", async () => {
    await envconfig("queue");
    const first = await submit("queue", "1.0.0");
    const second = await submit("queue", "2.0.0");
    assert.equal(second.queued_behind, first.id);
    const answer = await server.api.cancel(second.id);
    assert.equal(answer.status, "cancelled");
    assert.deepEqual(answer.cancel, { outcome: "cancelled", message: "cancelled before it started: nothing ran" });
    assert.equal((await server.api.deploy(first.id, 60)).status, "succeeded");
    assert.equal((await server.api.deploy(second.id)).status, "cancelled");
    assert.equal((await readJournal(ws.path("journal"))).filter((j) => j.deployment === second.id).length, 0);
    for (const h of hosts("queue")) assert.equal(await release(h), "1.0.0");
  });

  it("before the deploy step (fetching the artifact): stops there, the targets unchanged, status cancelled", async () => {
    const held = new HeldRequests("payload\n");
    const url = await held.start();
    try {
      await envconfig("early");
      const { id } = await submit("early", "2.0.0", `${url}/app.txt`);
      await held.arrived();
      const answer = await server.api.cancel(id);
      assert.equal(answer.cancel?.outcome, "requested");
      assert.match(answer.cancel!.message, /stops before its deploy step: the targets are not changed/);
      const d = await server.api.deploy(id, 60);
      assert.equal(d.status, "cancelled", JSON.stringify(d.error));
      assert.match(d.error!.message, /before the deploy step: the targets were not changed/);
      assert.equal((await readJournal(ws.path("journal"))).filter((j) => j.deployment === id && j.call === "deploy").length, 0);
    } finally {
      held.close();
    }
  });

  it("during the deploy step: the call stops and the targets are rolled back to the checkpoint, status rolled_back", async () => {
    await envconfig("mid");
    assert.equal((await server.api.deploy((await submit("mid", "1.0.0")).id, 60)).status, "succeeded");
    const { id } = await submit("mid", "2.0.0");
    await until(id, (d) => deployedTargets(d) >= 1);
    const answer = await server.api.cancel(id);
    assert.match(answer.cancel!.message, /rolled back to the checkpoint/);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back", JSON.stringify(d.error));
    assert.equal(d.error?.code, "canceled");
    assert.match(d.error!.message, /cancelled by a user during the deploy step; rollback to the checkpoint completed/);
    for (const h of hosts("mid")) assert.equal(await release(h), "1.0.0");
  });

  it("after the deploy step (a callback still running): refused with a message saying why and what to do", async () => {
    const held = new HeldRequests("");
    const url = await held.start();
    try {
      await envconfig("late", { callbacks: [{ url: `${url}/hook`, events: ["succeeded"] }] });
      const { id } = await submit("late", "2.0.0");
      await held.arrived();
      const refused = await server.api.cancel(id).then(
        () => undefined,
        (e: unknown) => e as ManentError,
      );
      assert.ok(refused, "a cancel after the deploy step was accepted");
      assert.equal(refused.toJSON().code, "failed_precondition");
      assert.match(refused.message, /its deploy step has finished and version 2\.0\.0 runs on its targets; to undo it, roll back/);
      held.releaseAll();
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
      for (const h of hosts("late")) assert.equal(await release(h), "2.0.0");
    } finally {
      held.close();
    }
  });

  // Cancels at every point of the deploy step and just after it, with and without rollback: the final
  // status never says `cancelled` while a target runs the new release.
  const moments = [0, 1, 2, 3, "end"] as const;
  for (const rollback of [true, false]) {
    it(`cancels at ${moments.length} moments of the deploy step (rollback ${rollback ? "enabled" : "disabled"}): the status tells what the targets run`, async () => {
      for (const [i, moment] of moments.entries()) {
        const app = `sweep-${rollback}-${i}`;
        await envconfig(app, {}, rollback);
        assert.equal((await server.api.deploy((await submit(app, "1.0.0")).id, 60)).status, "succeeded");
        const { id } = await submit(app, "2.0.0");
        if (moment === "end") {
          while (!(await readJournal(ws.path("journal"))).some((j) => j.deployment === id && j.call === "deploy_end")) {
            await new Promise((r) => setTimeout(r, 10));
          }
        } else {
          // On a loaded machine the deploy may end between two looks: the cancel then comes late,
          // which the assertions below cover (refused, succeeded).
          await until(id, (d) => terminalStatuses.has(d.status) || (d.status === "running" && deployedTargets(d) >= moment));
        }
        const answer = await server.api.cancel(id).then(
          (a) => a.cancel!,
          (e: unknown) => ({ outcome: "refused", message: (e as Error).message }),
        );
        const d = await server.api.deploy(id, 60);
        const releases = await Promise.all(hosts(app).map(release));
        const context = `moment ${moment}: cancel ${JSON.stringify(answer)}, deploy ${d.status} ${JSON.stringify(d.error)}, targets ${releases.join(",")}`;
        if (answer.outcome === "refused") {
          assert.equal(d.status, "succeeded", context);
          assert.match(answer.message, /deploy step has finished|has already ended \(succeeded\)/, context);
        }
        if (d.status === "succeeded") assert.deepEqual(releases, ["2.0.0", "2.0.0", "2.0.0"], context);
        if (d.status === "rolled_back") assert.deepEqual(releases, ["1.0.0", "1.0.0", "1.0.0"], context);
        if (d.status === "cancelled") assert.deepEqual(releases, ["1.0.0", "1.0.0", "1.0.0"], context);
        if (d.status === "failed") assert.match(d.error!.message, /not rolled back/, context);
        assert.ok(rollback ? d.status !== "failed" : d.status !== "rolled_back", context);
      }
    });
  }
});
