import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { RequestLog } from "../../src/server/request-log.js";
import { StartupHandler } from "../../src/server/startup-handler.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** The log an SRE reads: JSON lines only, a request id on each line of a request and in its answer, one access line per request. */
describe("request ids, access log and probes", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "logs\n");
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }],
      params: { state_dir: ws.path("state") },
    });
    // At the default level (info), as a server runs in production.
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), {
      cwd: ws.dir,
      env: { MANENT_LOG_LEVEL: "info" },
    });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  const lines = () =>
    server
      .logs()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          throw new Error(`a log line that is not JSON: ${l}`);
        }
      });
  const accessLine = (requestId: string) =>
    server.logged(new RegExp(`"request_id":"${requestId}".*"msg":"request"`)).then((l) => JSON.parse(l) as Record<string, unknown>);

  it("keeps a client's X-Request-Id: in the answer's header, on the access line and on the lines the request logged", async () => {
    const body = { descriptor: descriptor("shop", "prod", artifact, "1.0.0"), descriptor_file: "shop.yml" };
    const { id } = await server.api.submit(body);
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    await writeFile(ws.path("state", "shop-1.release"), "0.9.0"); // changed by hand: the check below finds drift

    const res = await fetch(`${server.url}/api/v1/drift/checks`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "ci-run-4711.step-2" },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, await res.text());
    assert.equal(res.headers.get("x-request-id"), "ci-run-4711.step-2");
    const access = await accessLine("ci-run-4711\\.step-2");
    assert.deepEqual(
      { method: access.method, path: access.path, route: access.route, status: access.status, level: access.level },
      { method: "POST", path: "/api/v1/drift/checks", route: "/api/v1/drift/checks", status: 200, level: 30 },
    );
    assert.equal(typeof access.duration_ms, "number");
    // What the check logged while it answered names the request too.
    const found = lines().find((l) => l.msg === "drift found");
    assert.equal(found?.request_id, "ci-run-4711.step-2", JSON.stringify(found));
  });

  it("puts the request id in every error answer, and makes a new one for a missing or unfit X-Request-Id", async () => {
    const ids = new Set<string>();
    for (const sent of [undefined, "", "x".repeat(129), "two words", "<script>", "ok-but-then;drop"]) {
      const res = await fetch(`${server.url}/api/v1/deploys/${randomUUID()}`, {
        headers: sent === undefined ? {} : { "x-request-id": sent },
      });
      assert.equal(res.status, 404);
      const answer = (await res.json()) as { error: { code: string; request_id?: string } };
      const id = res.headers.get("x-request-id")!;
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `replaced ${JSON.stringify(sent)}`);
      assert.equal(answer.error.request_id, id);
      assert.equal(answer.error.code, "not_found");
      ids.add(id);
      const access = await accessLine(id);
      assert.equal(access.route, "/api/v1/deploys/:id");
      assert.equal(access.status, 404);
    }
    assert.equal(ids.size, 6, "one id per request");

    // A path no route takes, and a body the API refuses, name it as well.
    const unknown = await fetch(`${server.url}/nowhere/${"a".repeat(20)}`, { headers: { "x-request-id": "probe-1" } });
    assert.equal(((await unknown.json()) as { error: { request_id: string } }).error.request_id, "probe-1");
    assert.equal((await accessLine("probe-1")).route, "unmatched");
    const bad = await fetch(`${server.url}/api/v1/deploys`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "bad-body" },
      body: "{",
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { request_id: string } }).error.request_id, "bad-body");
  });

  it("writes neither tokens nor a query string to the access line, and nothing but JSON lines to the log", async () => {
    const secret = "s3cr3t-t0ken-value-8b1d";
    await fetch(`${server.url}/api/v1/deploys?token=${secret}&limit=1`, {
      headers: { authorization: `Bearer ${secret}`, cookie: `manent_session=${secret}`, "x-request-id": "with-secrets" },
    });
    const access = await accessLine("with-secrets");
    assert.equal(access.path, "/api/v1/deploys");
    assert.doesNotMatch(server.logs(), new RegExp(secret));
    // An event stream, whose headers go straight to the socket, names its request too.
    const controller = new AbortController();
    const events = await fetch(`${server.url}/api/v1/events`, { headers: { "x-request-id": "stream-1" }, signal: controller.signal });
    assert.equal(events.status, 200);
    assert.equal(events.headers.get("x-request-id"), "stream-1");
    controller.abort();
    await accessLine("stream-1");
    // Probes and scrapes are logged at debug level (not at info, where this server is).
    for (const path of ["/livez", "/readyz", "/healthz", "/metrics"]) assert.equal((await fetch(`${server.url}${path}`)).status, 200);
    assert.ok(lines().every((l) => typeof l.level === "number" && typeof l.msg === "string"));
    assert.equal(lines().filter((l) => l.msg === "request" && typeof l.path === "string" && l.path.endsWith("z")).length, 0);
    assert.equal(lines().filter((l) => String(l.msg).startsWith("manent-server listening on ")).length, 1);
  });

  it("counts requests by route and status code, and their durations, in the metrics", async () => {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /^manent_http_requests_total\{method="GET",route="\/api\/v1\/deploys\/:id",code="404"\} 6$/m);
    assert.match(metrics, /^manent_http_requests_total\{method="GET",route="unmatched",code="404"\} 1$/m);
    assert.match(metrics, /^manent_http_request_duration_seconds_count\{method="POST",route="\/api\/v1\/drift\/checks"\} 1$/m);
  });
});

describe("probes while the server starts", () => {
  it("answers /livez 200 and /readyz (and the API) 503 with a request id until start-up is done", async () => {
    const startup = new StartupHandler(new RequestLog());
    const http = createServer(startup.handle);
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    try {
      const live = await fetch(`${url}/livez`);
      assert.equal(live.status, 200);
      assert.deepEqual(await live.json(), { status: "ok", starting: true });
      for (const path of ["/readyz", "/api/v1/deploys?limit=1"]) {
        const res = await fetch(`${url}${path}`, { headers: { "x-request-id": "early-1" } });
        assert.equal(res.status, 503);
        assert.equal(res.headers.get("retry-after"), "1");
        assert.equal(res.headers.get("x-request-id"), "early-1");
        assert.deepEqual(await res.json(), { error: { code: "unavailable", message: "manent-server is starting", request_id: "early-1" } });
      }
      startup.ready((_req, res) => res.end("api"));
      assert.equal(await (await fetch(`${url}/readyz`)).text(), "api", "the API answers from then on");
    } finally {
      http.close();
    }
  });
});
