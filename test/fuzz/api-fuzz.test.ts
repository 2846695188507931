import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { request as httpRequest } from "node:http";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";
import { hostileString, hostileValue } from "./config-fuzz.test.js";

const token = "fuzz-token-0123456789";

/** Sends a raw request (the path as given, not normalized) and answers status, body and headers. */
function send(
  base: URL,
  method: string,
  path: string,
  body?: string | Buffer,
  type = "application/json",
  /** Replaces the bearer token's header (a cookie, no credential…). */
  headers?: Record<string, string>,
): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method,
        path,
        agent: false,
        headers: {
          ...(headers ?? { authorization: `Bearer ${token}` }),
          ...(body !== undefined && { "content-type": type, "content-length": Buffer.byteLength(body) }),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A GET with another bearer token. */
function sendAs(base: URL, bearer: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: base.hostname, port: base.port, method: "GET", path, agent: false, headers: { authorization: `Bearer ${bearer}` } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Every byte of a string's UTF-8 percent-encoded, so any string (lone surrogates too) makes a valid request line. */
const encodeAll = (s: string) => [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
// Under Node's 16 KiB header limit: past it, Node's own parser answers 431 and closes the connection.
const queryValue = fc.oneof(
  hostileString.map(encodeAll).filter((v) => v.length < 4000),
  fc.constantFrom("%00", "%ff", "%", "%zz", "-1", "1.5", "0", "1e3", "NaN", "Infinity", "99999999999999999999"),
);

/**
 * Property-based fuzzing of the HTTP API of a real server: hostile bodies, paths and query strings
 * on every route. Every answer is 2xx/4xx with the error shape, never a 5xx, and the server lives on.
 */
describe("HTTP API under fuzzing", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let provider: RunningOidcProvider;
  let base: URL;
  let deployId = "";
  let releaseId = "";

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    provider = await startOidcProvider({ client: { id: "manent", secret: "fuzz-oidc-client-secret" } });
    await ws.write("dist/app.txt", "fuzz\n");
    await ws.write("envconfig/untenanted/fz/fz/test.yml", {
      plugin: "noop",
      targets: [{ host: "fz-1" }],
      params: { state_dir: ws.path("state") },
    });
    // A release that waits for a manual promotion, so the per-release routes are fuzzed past "not found".
    await ws.write("envconfig/untenanted/fz/pipeline.yml", { stages: [{ environment: "test", promotion: "manual" }] });
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          tokens: [{ name: "fuzz", tenant: "*", sha256: createHash("sha256").update(token).digest("hex") }],
          // Sign-in with a real provider, so the sign-in routes are fuzzed past "not configured".
          oidc: { issuer: provider.issuer, client_id: "manent", client_secret: "env:FUZZ_OIDC_SECRET" },
        },
      }),
    );
    server = await startServer(config, {
      cwd: ws.dir,
      env: { MANENT_LOG_LEVEL: "info", FUZZ_OIDC_SECRET: "fuzz-oidc-client-secret" },
      token,
    });
    provider.setRedirectUris([`${server.url}/auth/callback`]);
    base = new URL(server.url);
    // A real deploy, so the per-deploy routes are fuzzed past "not found" too.
    const submitted = await server.api.submit({
      descriptor: {
        apiVersion: "manent/v1",
        application: "fz",
        environment: "test",
        artifact: { type: "file", name: "fz", version: "1.0.0", source: ws.path("dist/app.txt") },
      },
    });
    deployId = (await server.api.deploy(submitted.id, 60)).id;
    releaseId = (
      await server.api.startRelease({
        descriptor: {
          apiVersion: "manent/v1",
          application: "fz",
          artifact: { type: "file", name: "fz", version: "2.0.0", source: ws.path("dist/app.txt") },
        },
      })
    ).id;
  });
  after(async () => {
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  const answered = (r: { status: number; text: string }, what: string) => {
    assert.ok(r.status < 500, `${what}: HTTP ${r.status} ${r.text.slice(0, 500)}`);
    // Node's HTTP parser answers a request line or headers over its limit (16 KiB) with a bare 431.
    if (r.status === 431) return;
    if (r.status >= 400) {
      const body = JSON.parse(r.text) as { error?: { code?: unknown; message?: unknown } };
      assert.equal(typeof body.error?.code, "string", `${what}: ${r.text.slice(0, 300)}`);
      assert.equal(typeof body.error?.message, "string");
    }
  };

  // A valid descriptor, mutated at one place (top level or in artifact) with a hostile value.
  const validDescriptor = {
    apiVersion: "manent/v1",
    application: "fz",
    environment: "test",
    artifact: { type: "file", name: "fz", version: "1.0.0", source: "/nonexistent/app.txt" },
  };
  const descriptorArb = fc.oneof(
    hostileValue,
    fc
      .tuple(fc.constantFrom("apiVersion", "tenant", "application", "environment", "artifact", "extra"), hostileValue)
      .map(([k, v]) => ({ ...validDescriptor, [k]: v })),
    fc
      .tuple(fc.constantFrom("type", "name", "version", "source", "sha256", "extra"), fc.oneof(hostileString, hostileValue))
      .map(([k, v]) => ({ ...validDescriptor, artifact: { ...validDescriptor.artifact, [k]: v } })),
  );
  const bodyArb = fc.record(
    {
      descriptor: descriptorArb,
      descriptor_file: fc.oneof(hostileString, hostileValue),
      dry_run: fc.oneof(fc.constant(true), hostileValue),
      overrides: fc.oneof(
        fc.record({ version: hostileString, source: hostileString, sha256: hostileString }, { requiredKeys: [] }),
        hostileValue,
      ),
      to: fc.oneof(hostileString, fc.constantFrom("../x", "/etc/passwd", "x".repeat(1 << 20)), hostileValue),
    },
    { requiredKeys: [] },
  );

  it("deploys, rollbacks and drift checks: hostile JSON bodies and non-JSON text", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/api/v1/deploys", "/api/v1/rollbacks", "/api/v1/drift/checks", "/api/v1/releases"),
        fc.oneof({ weight: 4, arbitrary: bodyArb.map((b) => JSON.stringify(b)) }, fc.string({ unit: "binary", maxLength: 100 }), fc.json()),
        async (path, body) => answered(await send(base, "POST", path, body), `POST ${path} ${body.slice(0, 200)}`),
      ),
      { numRuns: 1200 },
    );
  });

  it("lists, reads, cancels and uploads: hostile paths and query strings", async () => {
    const keys = fc.constantFrom(
      "tenant",
      "application",
      "environment",
      "artifact",
      "limit",
      "wait",
      "action",
      "actor",
      "actor_id",
      "dry_run",
      "x",
    );
    const query = fc.array(fc.tuple(keys, queryValue), { maxLength: 3 }).map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join("&"));
    const segment = fc.oneof(
      queryValue,
      fc.constantFrom(deployId, releaseId, "00000000-0000-0000-0000-000000000000", "a".repeat(64), "..", "%2e%2e", "%2f"),
    );
    const route = fc.oneof(
      query.map((q) => ["GET", `/api/v1/deploys?${q}`] as const),
      query.map((q) => ["GET", `/api/v1/overview?${q}`] as const),
      fc.tuple(segment, query).map(([id, q]) => ["GET", `/api/v1/deploys/${id}?${q}`] as const),
      fc
        .tuple(segment, fc.constantFrom("cancel", "retry", "approve", "promote", "abort"))
        .map(([id, action]) => ["POST", `/api/v1/deploys/${id}/${action}`] as const),
      fc.tuple(segment, query).map(([sha, q]) => ["GET", `/api/v1/uploads/${sha}?${q}`] as const),
      fc.tuple(segment, query).map(([sha, q]) => ["PUT", `/api/v1/uploads/${sha}?${q}`] as const),
      // Deletion, listing and the sweep of uploads (issue 20, item 2).
      fc.tuple(segment, query).map(([sha, q]) => ["DELETE", `/api/v1/uploads/${sha}?${q}`] as const),
      query.map((q) => ["GET", `/api/v1/uploads?${q}`] as const),
      fc
        .tuple(fc.constantFrom("true", "false", "", "1", "%00"), query)
        .map(([d, q]) => ["POST", `/api/v1/uploads/sweep?dry_run=${d}&${q}`] as const),
      fc.tuple(fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH"), segment).map(([m, p]) => [m, `/api/v1/${p}`] as const),
      query.map((q) => ["GET", `/api/v1/plugins?${q}`] as const),
      query.map((q) => ["GET", `/api/v1/drift?${q}`] as const),
      // Roles and permissions: the caller, can-i with hostile actions and scopes, the audit log filtered by principal.
      query.map((q) => ["GET", `/api/v1/whoami?${q}`] as const),
      fc
        .tuple(fc.constantFrom("read", "submit", "approve", "token_admin", "fly", ""), query)
        .map(([action, q]) => ["GET", `/api/v1/auth/can-i?action=${action}&${q}`] as const),
      query.map((q) => ["GET", `/api/v1/audit?${q}`] as const),
      // The server's version, answered without a token: hostile queries and methods change nothing.
      fc.tuple(fc.constantFrom("GET", "POST", "PUT", "DELETE"), query).map(([m, q]) => [m, `/api/v1/version?${q}`] as const),
      // Releases: lists, one release, its events, and the commands on it (promote with a hostile body below).
      query.map((q) => ["GET", `/api/v1/releases?${q}&status=${["running", "x", ""][q.length % 3]}`] as const),
      fc.tuple(segment, query).map(([id, q]) => ["GET", `/api/v1/releases/${id}?${q}`] as const),
      fc
        .tuple(segment, fc.constantFrom("cancel", "approve", "promote"))
        .map(([id, action]) => ["POST", `/api/v1/releases/${id}/${action}`] as const),
    );
    await fc.assert(
      fc.asyncProperty(
        route,
        fc.option(
          fc.oneof(
            fc.string({ maxLength: 50 }),
            hostileValue.map((v) => JSON.stringify(v) ?? "null"),
          ),
          { nil: undefined },
        ),
        async ([method, path], body) => {
          const withBody = method === "GET" ? undefined : (body ?? "");
          answered(
            await send(base, method, path, withBody, method === "PUT" ? "application/octet-stream" : "application/json"),
            `${method} ${path}`,
          );
        },
      ),
      { numRuns: 1500 },
    );
  });

  it("API tokens: hostile create bodies, list queries, revoke ids and mnt_ bearer tokens", async () => {
    const validToken = { name: "fz-token", role: "viewer", tenant: "untenanted", application: "*", environment: "*", expires_in: "1d" };
    const tokenBody = fc.oneof(
      hostileValue.map((v) => JSON.stringify(v) ?? "null"),
      fc
        .tuple(
          fc.constantFrom("name", "role", "tenant", "application", "environment", "expires_in", "token", "extra"),
          fc.oneof(hostileString, hostileValue),
          fc.nat(),
        )
        // Mostly fresh names, so a valid rest is created and the next one is not refused as taken.
        .map(([k, v, n]) => JSON.stringify({ ...validToken, name: `fz-${n}`, [k]: v })),
      fc
        .constantFrom("1d", "366d", "367d", "0d", "1s", "99999999d", "1.5d", "-1d")
        .map((e) => JSON.stringify({ ...validToken, name: "fz-expiry", expires_in: e })),
    );
    const segment = fc.oneof(queryValue, fc.constantFrom("00000000-0000-0000-0000-000000000000", "..", "%2f", "a".repeat(36)));
    const query = fc
      .array(fc.tuple(fc.constantFrom("tenant", "limit", "x"), queryValue), { maxLength: 3 })
      .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join("&"));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          tokenBody.map((b) => ["POST", "/api/v1/tokens", b] as const),
          query.map((q) => ["GET", `/api/v1/tokens?${q}`, undefined] as const),
          segment.map((id) => ["DELETE", `/api/v1/tokens/${id}`, undefined] as const),
        ),
        async ([method, path, body]) => answered(await send(base, method, path, body), `${method} ${path} ${body?.slice(0, 200) ?? ""}`),
      ),
      { numRuns: 600 },
    );
    // Bearer tokens that look managed: refused as unknown (401), never a failure.
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 80 }), fc.base64String({ maxLength: 60 })), async (rest) => {
        const value = `mnt_${rest}`.replace(/[^\x21-\x7e]/g, "x");
        const r = await sendAs(base, value, "/api/v1/deploys");
        answered(r, `bearer ${value}`);
        assert.equal(r.status, 401, `bearer ${value}: ${r.text}`);
      }),
      { numRuns: 300 },
    );
  });

  it("sign-in routes and credentials: hostile query strings, cookies, CSRF headers and JWT-shaped bearer tokens", async () => {
    // A real sign-in in progress (its login cookie and state), so the callback is fuzzed up to the provider's token endpoint.
    const started = await send(base, "GET", "/auth/login?return_to=%2F", undefined, undefined, {});
    assert.equal(started.status, 302, started.text);
    const loginCookie = String(started.headers["set-cookie"]).split(";")[0]!;
    const state = new URL(String(started.headers.location)).searchParams.get("state")!;
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v) ?? "null").toString("base64url");
    const jwt = fc
      .tuple(
        fc.oneof(fc.record({ alg: fc.oneof(fc.constantFrom("RS256", "none", "HS256", "ES256"), hostileString) }), hostileValue),
        hostileValue,
        queryValue,
      )
      .map(([h, p, sig]) => `${b64(h)}.${b64(p)}.${sig.replace(/%/g, "")}`)
      // Under Node's 16 KiB header limit, as queryValue is.
      .filter((t) => t.length < 4000);
    const cookieValue = fc.oneof(queryValue, fc.constant(""), jwt);
    const request = fc.oneof(
      queryValue.map((v) => ["GET", `/auth/login?return_to=${v}`, {}] as const),
      fc
        .tuple(queryValue, fc.oneof(queryValue, fc.constant(state)), fc.option(queryValue, { nil: undefined }), fc.boolean())
        .map(
          ([code, st, error, withCookie]) =>
            [
              "GET",
              `/auth/callback?code=${code}&state=${st}${error ? `&error=${error}` : ""}`,
              (withCookie ? { cookie: loginCookie } : {}) as Record<string, string>,
            ] as const,
        ),
      fc
        .tuple(cookieValue, cookieValue)
        .map(([session, csrf]) => ["POST", "/auth/logout", { cookie: `manent_session=${session}`, "x-manent-csrf": csrf }] as const),
      fc.constant(["GET", "/auth/oidc", {}] as const),
      fc
        .tuple(fc.constantFrom("GET", "POST"), cookieValue)
        .map(([m, session]) => [m, "/api/v1/deploys", { cookie: `manent_session=${session}`, origin: base.origin }] as const),
      fc
        .tuple(fc.constantFrom("GET", "POST"), jwt)
        .map(([m, bearer]) => [m, "/api/v1/deploys", { authorization: `Bearer ${bearer}` }] as const),
    );
    await fc.assert(
      fc.asyncProperty(request, async ([method, path, headers]) => {
        const r = await send(base, method, path, method === "POST" ? "{}" : undefined, "application/json", headers);
        if (r.status === 302) return;
        answered(r, `${method} ${path} ${JSON.stringify(headers).slice(0, 300)}`);
      }),
      { numRuns: 600 },
    );
  });

  it("releases: hostile promote bodies on a waiting release, and events of ids that are no release", async () => {
    const body = fc.oneof(
      hostileValue.map((v) => JSON.stringify(v) ?? "null"),
      fc.oneof(hostileString, hostileValue, fc.constantFrom("test", "prod", "TEST", "../test")).map((to) => JSON.stringify({ to })),
      fc.string({ unit: "binary", maxLength: 100 }),
    );
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const path = `/api/v1/releases/${releaseId}/promote`;
        answered(await send(base, "POST", path, b), `POST ${path} ${b.slice(0, 200)}`);
      }),
      { numRuns: 300 },
    );
    // Ids only: "..", "%2e%2e" and the like would name /api/v1/events, a live stream that never ends.
    const notRelease = fc.oneof(fc.uuid(), fc.stringMatching(/^[0-9a-f]{1,40}$/), fc.constantFrom(deployId, "x", "%00"));
    await fc.assert(
      fc.asyncProperty(notRelease, async (id) => {
        const path = `/api/v1/releases/${id}/events`;
        const r = await send(base, "GET", path);
        answered(r, `GET ${path}`);
        assert.ok(r.status >= 400, `GET ${path}: ${r.status}`);
      }),
      { numRuns: 100 },
    );
  });

  it("is still serving, and logged no request failure", async () => {
    const r = await send(base, "GET", "/healthz");
    assert.equal(r.status, 200);
    assert.doesNotMatch(server.logs(), /"request failed"/);
  });
});
