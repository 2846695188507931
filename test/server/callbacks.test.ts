import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { CallbackPayload } from "../../src/core/engine/callbacks.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: CallbackPayload;
  answered: number;
}

/**
 * A webhook receiver on loopback. Each path answers with the statuses listed for it in turn (the
 * last one repeats); every request is recorded and can be awaited.
 */
class Receiver {
  readonly received: Received[] = [];
  private readonly waiters: { match: (r: Received) => boolean; count: number; resolve: () => void }[] = [];
  private readonly answers = new Map<string, number[]>();
  private server!: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "/";
        const statuses = this.answers.get(path) ?? [200];
        const answered = statuses.length > 1 ? statuses.shift()! : statuses[0]!;
        this.received.push({
          path,
          headers: req.headers,
          body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as CallbackPayload,
          answered,
        });
        res.writeHead(answered, { "content-type": "text/plain" }).end(answered < 300 ? "ok" : "no");
        for (const w of [...this.waiters]) this.check(w);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  answer(path: string, ...statuses: number[]): string {
    this.answers.set(path, statuses);
    return `${this.url}${path}`;
  }

  /** Resolves once `count` requests matching have arrived (at once if they already have). */
  waitFor(match: (r: Received) => boolean, count = 1): Promise<Received[]> {
    return new Promise<void>((resolve) => this.check({ match, count, resolve })).then(() => this.received.filter(match));
  }

  private check(w: { match: (r: Received) => boolean; count: number; resolve: () => void }): void {
    const i = this.waiters.indexOf(w);
    if (this.received.filter(w.match).length >= w.count) {
      if (i >= 0) this.waiters.splice(i, 1);
      w.resolve();
    } else if (i < 0) this.waiters.push(w);
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** Webhooks of a real manent-server to a real HTTP receiver: payload, retries, failures, rollback. */
describe("deploy callbacks", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let receiver: Receiver;
  let artifact: string;

  const envconfig = (app: string, body: Record<string, unknown>) => ws.write(`envconfig/untenanted/${app}/${app}/test.yml`, body);
  const params = (extra: Record<string, string> = {}) => ({ state_dir: ws.path("state"), ...extra });
  const forDeploy = (id: string, path: string) => (r: Received) => r.body.deploy.id === id && r.path === path;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    receiver = new Receiver();
    await receiver.start();
    artifact = await ws.write("dist/app.txt", "hello\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await receiver?.stop();
    await pg?.stop();
  });

  it("posts started and succeeded with the documented payload", async () => {
    const url = receiver.answer("/ok", 200);
    await envconfig("hooks", {
      plugin: "noop",
      targets: [{ host: "h1" }],
      params: params(),
      callbacks: [{ url, events: ["started", "succeeded"] }],
    });
    const { id } = await server.api.submit({ descriptor: descriptor("hooks", "test", artifact, "1.2.3"), descriptor_file: "hooks.yml" });
    const [started, succeeded] = await receiver.waitFor(forDeploy(id, "/ok"), 2);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));

    assert.deepEqual([started!.body.event, succeeded!.body.event], ["started", "succeeded"]);
    const expected = {
      id,
      kind: "deploy",
      tenant: "untenanted",
      application: "hooks",
      artifact: "hooks",
      environment: "test",
      version: "1.2.3",
      plugin: "noop",
    };
    assert.deepEqual(started!.body.deploy, { ...expected, status: "running", error: null });
    assert.deepEqual(succeeded!.body.deploy, { ...expected, status: "succeeded", error: null });
    for (const r of [started!, succeeded!]) {
      assert.deepEqual(Object.keys(r.body).sort(), ["deploy", "event", "sent_at"]);
      assert.ok(!Number.isNaN(Date.parse(r.body.sent_at)), r.body.sent_at);
      assert.equal(r.headers["content-type"], "application/json");
      assert.equal(r.headers["x-manent-event"], r.body.event);
    }
    assert.ok(Date.parse(started!.body.sent_at) <= Date.parse(succeeded!.body.sent_at));
    const steps = d.steps.filter((s) => s.name.startsWith("callback:")).map((s) => `${s.name}:${s.status}:${s.attempts}`);
    assert.deepEqual(steps, ["callback:started:0:succeeded:1", "callback:succeeded:0:succeeded:1"]);
  });

  it("retries a receiver that answers 500, then records its success", async () => {
    const url = receiver.answer("/flaky", 500, 200);
    await envconfig("flaky", {
      plugin: "noop",
      targets: [{ host: "f1" }],
      params: params(),
      retry_interval: "10ms",
      callbacks: [{ url, events: ["succeeded"], max_retries: 3 }],
    });
    const { id } = await server.api.submit({ descriptor: descriptor("flaky", "test", artifact), descriptor_file: "flaky.yml" });
    const calls = await receiver.waitFor(forDeploy(id, "/flaky"), 2);
    assert.deepEqual(
      calls.map((c) => c.answered),
      [500, 200],
    );
    assert.deepEqual(
      calls.map((c) => c.body.event),
      ["succeeded", "succeeded"],
    );
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded");
    const step = d.steps.find((s) => s.name === "callback:succeeded:0");
    assert.equal(step?.status, "succeeded");
    assert.equal(step?.attempts, 2);
    assert.equal(step?.error, null);
    assert.equal(JSON.parse(step!.output!.result).status, 200);
  });

  it("does not fail the deploy when the receiver always fails; the step record keeps the error", async () => {
    const url = receiver.answer("/down", 503);
    await envconfig("down", {
      plugin: "noop",
      targets: [{ host: "d1" }],
      params: params(),
      retry_interval: "10ms",
      callbacks: [{ url, events: ["succeeded"], max_retries: 2 }],
    });
    const { id } = await server.api.submit({ descriptor: descriptor("down", "test", artifact), descriptor_file: "down.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.error, null);
    assert.equal(receiver.received.filter(forDeploy(id, "/down")).length, 3);
    const step = d.steps.find((s) => s.name === "callback:succeeded:0");
    assert.equal(step?.status, "failed");
    assert.equal(step?.attempts, 3);
    assert.equal(step?.error?.code, "unavailable");
    assert.match(step!.error!.message, /callback http:\/\/127\.0\.0\.1:\d+\/down: HTTP 503/);
  });

  it("posts rolled_back for a failed deploy that was rolled back", async () => {
    const url = receiver.answer("/rb", 200);
    const config = (extra: Record<string, string>) => ({
      plugin: "noop",
      targets: [{ host: "r1" }, { host: "r2" }],
      params: params(extra),
      rollback: { enabled: true },
      callbacks: [{ url, events: ["failed", "rolled_back"] }],
    });
    await envconfig("rb", config({}));
    const first = await server.api.submit({ descriptor: descriptor("rb", "test", artifact, "1.0.0"), descriptor_file: "rb.yml" });
    assert.equal((await server.api.deploy(first.id, 60)).status, "succeeded");
    await envconfig("rb", config({ fail_hosts: "r2" }));
    const second = await server.api.submit({ descriptor: descriptor("rb", "test", artifact, "2.0.0"), descriptor_file: "rb.yml" });
    const [hook] = await receiver.waitFor(forDeploy(second.id, "/rb"));
    const d = await server.api.deploy(second.id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(hook!.body.event, "rolled_back");
    assert.equal(hook!.body.deploy.status, "rolled_back");
    assert.equal(hook!.body.deploy.version, "2.0.0");
    assert.equal(hook!.body.deploy.error?.code, "aborted");
    assert.match(hook!.body.deploy.error!.message, /target r2: failing as configured.*; rollback completed$/);
    // Neither the first deploy (not subscribed to succeeded) nor a "failed" event was sent.
    assert.deepEqual(
      receiver.received.filter((r) => r.path === "/rb").map((r) => `${r.body.deploy.id === second.id}:${r.body.event}`),
      ["true:rolled_back"],
    );
  });
});
