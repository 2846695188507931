import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { isFinishEvent } from "../../src/core/engine/deploy-events.js";
import { collect } from "../support/event-stream.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const adminToken = "events-admin-token-0123";
const teamToken = "events-team-a-token-4567";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * The event streams: driven by LISTEN/NOTIFY across two servers on one database, resumable with
 * Last-Event-ID, tenant-scoped; `?wait=` and the CLI follow them instead of polling.
 */
describe("event streams", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let servers: ServerProcess[] = [];
  let artifact: string;
  const api = (i: number, token = adminToken) => new ApiClient(servers[i]!.url, token);

  const app = (tenant: string, name: string, hosts: number, delay: string) =>
    ws.write(`envconfig/${tenant}/${name}/${name}/test.yml`, {
      plugin: "noop",
      targets: Array.from({ length: hosts }, (_, i) => ({ host: `${name}-${i + 1}` })),
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay },
    });
  const submit = async (server: number, tenant: string, name: string, version = "1.0.0") =>
    (await api(server).submit({ descriptor: { ...descriptor(name, "test", artifact, version), tenant }, descriptor_file: `${name}.yml` }))
      .id;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "events\n");
    const databaseUrl = await pg.createDatabase();
    const auth = {
      tokens: [
        { name: "admin", tenant: "*", sha256: sha(adminToken) },
        { name: "team-a", tenant: "team-a", sha256: sha(teamToken) },
      ],
    };
    for (const executor of ["events-1", "events-2"]) {
      const config = await ws.write(
        `${executor}.yml`,
        manentYml(undefined, { dbos: { database_url: databaseUrl, executor_id: executor }, workdir: `./work-${executor}`, auth }),
      );
      servers.push(await startServer(config, { cwd: ws.dir }));
    }
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    servers = [];
    await pg?.stop();
  });

  it("delivers a deploy's events, written through one server, to a stream on the other, in order", async (t) => {
    await app("team-a", "shop", 2, "200ms");
    const stream = collect(servers[1]!.url, adminToken, "/api/v1/events");
    await stream.opened;
    const submittedAt = Date.now();
    const id = await submit(0, "team-a", "shop");
    const finished = await stream.waitFor((e) => e.deploy_id === id && isFinishEvent(e));
    await stream.stop();
    const mine = stream.events.filter((e) => e.deploy_id === id);
    assert.equal(finished.data.status, "succeeded");
    const types = mine.map((e) => e.type);
    assert.equal(types[0], "deploy.created");
    // It starts with the plugin its pinned settings name: one status change to running, not a second for the plugin.
    assert.deepEqual(
      mine.filter((e) => e.type === "deploy.status").map((e) => `${String(e.data.status)} ${String(e.data.plugin)}`),
      ["running noop", "succeeded noop"],
    );
    for (const step of ["resolve", "deploy"]) {
      assert.ok(
        mine.some((e) => e.type === "step.started" && e.data.name === step),
        `no step.started for ${step}: ${types.join(", ")}`,
      );
      assert.ok(
        mine.some((e) => e.type === "step.succeeded" && e.data.name === step),
        `no step.succeeded for ${step}: ${types.join(", ")}`,
      );
    }
    for (const host of ["shop-1", "shop-2"]) {
      assert.ok(
        mine.some((e) => e.type === "target.updated" && e.data.host === host && e.data.status === "deployed"),
        `no target event for ${host}`,
      );
    }
    const ids = stream.events.map((e) => e.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
      "ids increase",
    );
    assert.equal(new Set(ids).size, ids.length, "no event twice");

    // Latency on this machine (reported, not asserted: the machine is shared).
    const first = mine[0]!;
    const stepEnds = mine.filter((e) => e.type === "step.succeeded");
    const lag = stepEnds.map((e) => e.receivedAt - Date.parse(e.at));
    t.diagnostic(`submit -> first event at the client: ${first.receivedAt - submittedAt} ms (through the other server)`);
    t.diagnostic(
      `step end (recorded) -> event at the client: max ${Math.max(...lag)} ms, mean ${Math.round(lag.reduce((a, b) => a + b, 0) / lag.length)} ms over ${lag.length}`,
    );
  });

  it("resumes from Last-Event-ID on another server and misses nothing", async () => {
    await app("team-a", "resume", 4, "300ms");
    const id = await submit(0, "team-a", "resume");
    const path = `/api/v1/deploys/${id}/events`;
    // First connection, to server 1: dropped after the first target has finished.
    const first = collect(servers[0]!.url, adminToken, path);
    await first.waitFor((e) => e.type === "target.updated" && e.data.status === "deployed");
    await first.stop();
    const lastSeen = first.events[first.events.length - 1]!.id;
    // Second connection, to server 2, resuming after the last event seen.
    const second = collect(servers[1]!.url, adminToken, path, { after: lastSeen });
    await second.waitFor(isFinishEvent);
    await second.stop();
    assert.ok(second.events.length > 0 && second.events[0]!.id > lastSeen);
    // The whole history, read afresh: the two connections together saw exactly it.
    const replay = collect(servers[1]!.url, adminToken, path);
    await replay.waitFor(isFinishEvent);
    await replay.stop();
    const seen = [...first.events, ...second.events].map((e) => e.id);
    assert.deepEqual(
      seen,
      replay.events.map((e) => e.id),
    );
    assert.equal(replay.events.filter((e) => e.type === "target.updated" && e.data.status === "deployed").length, 4);
    // The Last-Event-ID header itself, as a browser's EventSource sends it.
    const res = await fetch(new URL(path, servers[0]!.url), {
      headers: { authorization: `Bearer ${adminToken}`, "last-event-id": String(lastSeen) },
    });
    const text = await readUntil(res, `id: ${replay.events.at(-1)!.id}\n`);
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(
      ids,
      second.events.map((e) => e.id),
    );
  });

  it("shows a tenant's token only its tenant's events", async () => {
    await app("team-b", "bank", 1, "0ms");
    // Asking for another tenant's events gets none of them: a caller sees what its grants let it
    // read, whatever it asks (as the deploy list does).
    const teamStream = collect(servers[0]!.url, teamToken, "/api/v1/events?tenant=team-b");
    const teamOwn = collect(servers[0]!.url, teamToken, "/api/v1/events");
    const adminStream = collect(servers[0]!.url, adminToken, "/api/v1/events");
    await Promise.all([teamStream.opened, teamOwn.opened, adminStream.opened]);
    const theirs = await submit(1, "team-b", "bank");
    await adminStream.waitFor((e) => e.deploy_id === theirs && isFinishEvent(e));
    // Submitted once team-b's deploy has ended: every event of it comes before this one's in each
    // stream (a stream delivers in id order), so team-a's finish means nothing of team-b's is pending.
    const mine = await submit(1, "team-a", "shop", "1.1.0");
    await teamOwn.waitFor((e) => e.deploy_id === mine && isFinishEvent(e));
    await adminStream.waitFor((e) => e.deploy_id === mine && isFinishEvent(e));
    await Promise.all([teamStream.stop(), teamOwn.stop(), adminStream.stop()]);
    assert.deepEqual([...new Set(teamOwn.events.map((e) => e.tenant))], ["team-a"]);
    assert.ok(!teamOwn.events.some((e) => e.deploy_id === theirs));
    assert.ok(!teamStream.events.some((e) => e.deploy_id === theirs), "team-b's events reached team-a's token");
    assert.ok(adminStream.events.some((e) => e.deploy_id === theirs));
    const other = await fetch(new URL(`/api/v1/deploys/${theirs}/events`, servers[0]!.url), {
      headers: { authorization: `Bearer ${teamToken}` },
    });
    assert.equal(other.status, 404);
    const none = await fetch(new URL("/api/v1/events", servers[0]!.url));
    assert.equal(none.status, 401);
  });

  it("answers ?wait= on the finishing event, from a server that did not run the deploy", async (t) => {
    await app("team-a", "waiter", 2, "400ms");
    const id = await submit(0, "team-a", "waiter");
    const start = Date.now();
    const d = await api(1).deploy(id, 60);
    const answeredAt = Date.now();
    assert.equal(d.status, "succeeded");
    assert.ok(d.finished_at);
    t.diagnostic(`?wait=: finished_at -> answer ${answeredAt - Date.parse(d.finished_at)} ms (waited ${answeredAt - start} ms)`);
  });

  it("the CLI follows the stream instead of polling: a constant number of requests, however long the deploy", async () => {
    await app("team-a", "slow", 4, "500ms");
    const proxy = await countingProxy(servers[0]!.url);
    try {
      // A file:// source is read by the server itself: no upload requests (both servers read it).
      const file = await ws.write("slow.yml", { ...descriptor("slow", "test", `file://${artifact}`, "2.0.0"), tenant: "team-a" });
      const r = await runCli(["deploy", "-f", file, "-o", "text"], { cwd: ws.dir, server: proxy.url, token: adminToken });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const id = /\[([0-9a-f-]{36})\]/.exec(r.stdout)?.[1];
      assert.ok(id, r.stdout);
      for (const host of ["slow-1", "slow-2", "slow-3", "slow-4"]) assert.match(r.stdout, new RegExp(`${host}: deployed`));
      assert.match(r.stdout, /✓ deploy/);
      assert.match(r.stdout, /succeeded\n$/);
      // 4 targets x 500 ms: a poller every 250 ms would have sent 8+ requests.
      assert.deepEqual(proxy.requests, [
        "POST /api/v1/deploys",
        `GET /api/v1/deploys/${id}`,
        `GET /api/v1/deploys/${id}/events`,
        `GET /api/v1/deploys/${id}`,
      ]);

      proxy.requests.length = 0;
      const again = await submit(0, "team-a", "slow", "2.0.1");
      const watch = await runCli(["status", again, "--watch", "-o", "text"], { cwd: ws.dir, server: proxy.url, token: adminToken });
      assert.equal(watch.code, 0, watch.stderr + watch.stdout);
      assert.match(watch.stdout, /slow-4: deployed/);
      // `status` ends with the environment's drift, as its last check found it: one request more, not a poll.
      assert.deepEqual(proxy.requests, [
        `GET /api/v1/deploys/${again}`,
        `GET /api/v1/deploys/${again}/events`,
        `GET /api/v1/deploys/${again}`,
        "GET /api/v1/drift",
      ]);
    } finally {
      await proxy.close();
    }
  });
});

describe("the CLI following a canary rollout", () => {
  it("prints the rollout's lines and ends with the deploy (a view built from events has the rollout's picture)", async () => {
    const pg = await TestPostgres.start();
    const ws = await createWorkspace();
    try {
      const artifact = await ws.write("dist/app.txt", "canary\n");
      const config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
      const server = await startServer(config, { cwd: ws.dir });
      try {
        await ws.write("envconfig/untenanted/can/can/test.yml", {
          plugin: "noop",
          targets: [{ host: "can-1" }, { host: "can-2" }],
          params: { state_dir: ws.path("state"), journal: ws.path("journal") },
          rollback: { enabled: true },
          rollout: { canary: { steps: [{ set_weight: 50 }, { set_weight: 100 }] } },
        });
        const file = await ws.write("can.yml", descriptor("can", "test", `file://${artifact}`, "1.0.0"));
        const r = await runCli(["deploy", "-f", file, "-o", "text"], { cwd: ws.dir, server: server.url });
        assert.equal(r.code, 0, r.stderr + r.stdout);
        assert.match(r.stdout, /succeeded\n$/);
      } finally {
        await server.stop();
      }
    } finally {
      await pg.stop();
    }
  });
});

/** Reads a streamed response until `marker` has arrived, then drops it. */
async function readUntil(res: Response, marker: string): Promise<string> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes(marker)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += value;
  }
  await reader.cancel();
  return text;
}

/** A loopback HTTP proxy that records each request's method and path (streams pass through as they come). */
async function countingProxy(target: string): Promise<{ url: string; requests: string[]; close(): Promise<void> }> {
  const requests: string[] = [];
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url!.split("?")[0]}`);
    const upstream = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
