import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/core/errors.js";
import { analysisCheckSchema, judge, measure, type AnalysisCheck } from "../../../src/core/rollout/analysis/index.js";
import { loopbackOutbound, outboundUnder } from "../../support/outbound-rules.js";

/** HTTP checks against a real HTTP server on loopback. */
describe("analysis: HTTP checks", () => {
  let server: Server;
  let base: string;
  let dir: string;
  const received: IncomingMessage[] = [];
  let health: unknown = { status: "ok", error_rate: 0.01, checks: { db: { ready: true } }, items: [{ version: "2.0.0" }] };
  const vars = {
    MANENT_VERSION: "2.0.0",
    MANENT_APPLICATION: "shop",
    MANENT_ENVIRONMENT: "prod",
    MANENT_TENANT: "acme",
    MANENT_PREVIOUS_VERSION: "1.0.0",
    MANENT_WEIGHT: "50",
  };
  const check = (http: Record<string, unknown>, fields: Record<string, unknown> = {}): AnalysisCheck =>
    analysisCheckSchema.parse({ http: { url: `${base}/health`, ...http }, ...fields });
  const signal = () => new AbortController().signal;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "manent-analysis-"));
    server = createServer((req, res) => {
      received.push(req);
      const url = new URL(req.url!, "http://x");
      switch (url.pathname) {
        case "/health":
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(health));
          return;
        case "/down":
          res.writeHead(503).end("unavailable");
          return;
        case "/moved":
          res.writeHead(302, { location: "/health" }).end();
          return;
        case "/text":
          res.writeHead(200, { "content-type": "text/plain" }).end("fine, thanks");
          return;
        case "/huge":
          res.writeHead(200, { "content-type": "application/json" });
          res.end(`{"pad":"${"x".repeat(2 * 1024 * 1024)}"}`);
          return;
        case "/hang":
          return; // never answers
        case "/echo":
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(JSON.stringify({ params: [...url.searchParams], auth: req.headers.authorization ?? null }));
          return;
        default:
          res.writeHead(404).end();
      }
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("an expected status is successful; another status fails naming it", async () => {
    const ok = await measure("health", check({}), vars, signal(), loopbackOutbound);
    assert.equal(ok.verdict, "successful");
    assert.equal(ok.value, 200);
    const down = await measure("health", check({ url: `${base}/down` }), vars, signal(), loopbackOutbound);
    assert.equal(down.verdict, "failed");
    assert.equal(down.value, 503);
    assert.equal(down.message, `health: GET ${base}/down answered 503, expected 2xx`);
    const accepted = await measure("health", check({ url: `${base}/down`, expected_status: [200, 503] }), vars, signal(), loopbackOutbound);
    assert.equal(accepted.verdict, "successful");
  });

  it("redirects are not followed", async () => {
    const m = await measure("health", check({ url: `${base}/moved` }), vars, signal(), loopbackOutbound);
    assert.equal(m.verdict, "failed");
    assert.match(m.message, /answered 302, expected 2xx/);
    const only = await measure("health", check({ expected_status: [200] }), vars, signal(), loopbackOutbound);
    assert.equal(only.verdict, "successful");
    const strict = await measure("health", check({ url: `${base}/moved`, expected_status: [200, 204] }), vars, signal(), loopbackOutbound);
    assert.match(strict.message, /answered 302, expected 200 or 204/);
  });

  it("a condition on a JSON field decides, with the field and value in the message", async () => {
    const c = check({ json_field: "error_rate" }, { success_condition: "result < 0.05" });
    const ok = await measure("app-errors", c, vars, signal(), loopbackOutbound);
    assert.equal(ok.verdict, "successful", ok.message);
    assert.equal(ok.value, 0.01);
    health = { status: "degraded", error_rate: 0.4 };
    try {
      const bad = await measure("app-errors", c, vars, signal(), loopbackOutbound);
      assert.equal(bad.verdict, "failed");
      assert.equal(bad.message, 'app-errors: error_rate = 0.4 does not meet success_condition "result < 0.05"');
      assert.equal(judge(c, [bad]).state, "failed");
      const status = await measure(
        "status",
        check({ json_field: "status" }, { success_condition: 'result == "ok"' }),
        vars,
        signal(),
        loopbackOutbound,
      );
      assert.equal(status.verdict, "failed");
      assert.equal(status.value, "degraded");
    } finally {
      health = { status: "ok", error_rate: 0.01, checks: { db: { ready: true } }, items: [{ version: "2.0.0" }] };
    }
    const nested = await measure(
      "db",
      check({ json_field: "checks.db.ready" }, { success_condition: "result == true" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(nested.verdict, "successful", nested.message);
    assert.equal(nested.value, "true");
    const indexed = await measure(
      "v",
      check({ json_field: "items.0.version" }, { success_condition: 'result == "2.0.0"' }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(indexed.verdict, "successful", indexed.message);
  });

  it("a missing field, an object, a non-JSON body and a value the condition cannot order are inconclusive", async () => {
    const missing = await measure(
      "x",
      check({ json_field: "nope.deeper" }, { success_condition: "result < 1" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(missing.verdict, "inconclusive");
    assert.match(missing.message, /has no field nope\.deeper/);
    const proto = await measure(
      "x",
      check({ json_field: "__proto__" }, { success_condition: "result == null" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(proto.verdict, "inconclusive", "only the response's own fields are read");
    const object = await measure(
      "x",
      check({ json_field: "checks" }, { success_condition: "result == 1" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(object.verdict, "inconclusive");
    assert.match(object.message, /field checks is an object/);
    const text = await measure(
      "x",
      check({ url: `${base}/text`, json_field: "a" }, { success_condition: "result < 1" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(text.verdict, "inconclusive");
    assert.match(text.message, /without a JSON body/);
    const order = await measure(
      "x",
      check({ json_field: "status" }, { success_condition: "result < 1" }),
      vars,
      signal(),
      loopbackOutbound,
    );
    assert.equal(order.verdict, "inconclusive");
    assert.match(order.message, /cannot order "ok" < 1/);
  });

  it("unreachable, too slow and too large are inconclusive", async () => {
    const port = await freedPort();
    const refused = await measure("x", check({ url: `http://127.0.0.1:${port}/health` }), vars, signal(), loopbackOutbound);
    assert.equal(refused.verdict, "inconclusive");
    assert.match(refused.message, new RegExp(`x: GET http://127\\.0\\.0\\.1:${port}/health unreachable: .*ECONNREFUSED`));
    const slow = await measure("x", check({ url: `${base}/hang`, timeout: "200ms" }), vars, signal(), loopbackOutbound);
    assert.equal(slow.verdict, "inconclusive");
    assert.match(slow.message, /unreachable: no answer within 200ms/);
    const huge = await measure("x", check({ url: `${base}/huge` }), vars, signal(), loopbackOutbound);
    assert.equal(huge.verdict, "inconclusive");
    assert.match(huge.message, /larger than 1048576/);
  });

  it("under the default address rules a loopback check fails, naming the field and the rule, and sends nothing", async () => {
    const before = received.length;
    const refused = await measure("health", check({}), vars, signal(), outboundUnder([]));
    assert.equal(refused.verdict, "failed");
    assert.match(refused.message, /^health: analysis\.checks\.health\.http\.url: host 127\.0\.0\.1 is .*artifacts\.allowed_networks/);
    const metadata = await measure(
      "meta",
      check({ url: "http://169.254.169.254/latest/meta-data/" }),
      vars,
      signal(),
      outboundUnder(["127.0.0.1/32"]),
    );
    assert.equal(metadata.verdict, "failed");
    assert.match(metadata.message, /analysis\.checks\.meta\.http\.url: host 169\.254\.169\.254 is a link-local address/);
    assert.equal(received.length, before, "no request reached the server");
  });

  it("cancelling a measurement in flight throws canceled", async () => {
    const controller = new AbortController();
    const waiting = measure("x", check({ url: `${base}/hang`, timeout: "1m" }), vars, controller.signal, loopbackOutbound);
    const before = received.length;
    // The request reaching the server is the event that shows the measurement is in flight.
    while (received.length === before) await once(server, "request");
    controller.abort();
    await assert.rejects(waiting, (err: unknown) => err instanceof ManentError && err.code === Code.Canceled);
  });

  it("variables in the URL are percent-encoded, so a value cannot add parameters", async () => {
    const c = check(
      { url: `${base}/echo?version=\${MANENT_VERSION}&app=\${MANENT_APPLICATION}`, json_field: "params" },
      { success_condition: "result != null" },
    );
    const hostile = { ...vars, MANENT_VERSION: "2.0.0&admin=true#frag" };
    await measure("echo", c, hostile, signal(), loopbackOutbound);
    const last = received.at(-1)!;
    assert.deepEqual(
      [...new URL(last.url!, "http://x").searchParams],
      [
        ["version", "2.0.0&admin=true#frag"],
        ["app", "shop"],
      ],
    );
  });

  it("a bearer token read from a file is sent and never appears in the measurement", async () => {
    const token = "file-token-0123456789";
    const file = join(dir, "token");
    await writeFile(file, `${token}\n`);
    const c = check({ url: `${base}/echo`, json_field: "auth", bearer_token: `file:${file}` }, { success_condition: "result != null" });
    const m = await measure("auth", c, vars, signal(), loopbackOutbound);
    assert.equal(received.at(-1)!.headers.authorization, `Bearer ${token}`);
    assert.equal(m.verdict, "successful");
    // The server echoed the header back: the recorded value is redacted.
    assert.equal(m.value, "Bearer ***");
    assert.ok(!JSON.stringify(m).includes(token), JSON.stringify(m));
    await writeFile(file, "two words\n");
    const invalid = await measure("auth", c, vars, signal(), loopbackOutbound);
    assert.equal(invalid.verdict, "inconclusive");
    assert.match(invalid.message, /bearer_token: the token must be printable ASCII without spaces/);
    assert.ok(!invalid.message.includes("two words"));
  });
});

/** A loopback port nothing listens on any more. */
async function freedPort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address() as AddressInfo;
  s.close();
  await once(s, "close");
  return port;
}
