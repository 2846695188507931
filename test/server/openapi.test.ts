import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createApiApp, type ApiDeps } from "../../src/server/http-api.js";
import { uiRoutes } from "../../src/server/routes/ui.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, manentYml } from "../support/workspace.js";

type OpenApiDocument = {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, { responses?: Record<string, unknown>; parameters?: unknown[] }>>;
  components?: { schemas?: Record<string, unknown> };
};

const methods = new Set(["get", "post", "put", "patch", "delete"]);

/** "GET /api/v1/deploys/{id}" for every operation of the document. */
function documented(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths)
    .flatMap(([path, ops]) =>
      Object.keys(ops)
        .filter((m) => methods.has(m))
        .map((m) => `${m.toUpperCase()} ${path}`),
    )
    .sort();
}

/** The OpenAPI document checked against the routes the server really serves, both ways. */
describe("OpenAPI document", () => {
  let pg: TestPostgres;
  let server: ServerProcess;
  let doc: OpenApiDocument;

  before(async () => {
    pg = await TestPostgres.start();
    const ws = await createWorkspace();
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), { auth: { tokens: [{ name: "ci", tenant: "*", token: "env:T" }] } }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { T: "openapi-test-token-123" } });
    const res = await fetch(new URL("/api/v1/openapi.json", server.url));
    assert.equal(res.status, 200, "the document is served without a token");
    doc = (await res.json()) as OpenApiDocument;
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("serves the server's version without a token, and only that among the API's routes", async () => {
    const res = await fetch(new URL("/api/v1/version", server.url));
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { version: doc.info.version, api: "v1" });
    assert.equal((await fetch(new URL("/api/v1/deploys", server.url))).status, 401);
  });

  it("documents exactly the routes the app registers", () => {
    // The routing table itself (no handler runs, so the dependencies are not needed).
    const app = createApiApp({} as ApiDeps);
    const served = [
      ...new Set(
        app.routes
          .filter((r) => r.method !== "ALL" && !uiRoutes.includes(`${r.method} ${r.path}`))
          .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}")}`),
      ),
    ].sort();
    assert.deepEqual(documented(doc), served);
  });

  it("names every documented route that the running server answers, and no other", async () => {
    const ops = documented(doc);
    assert.ok(ops.includes("GET /api/v1/deploys") && ops.includes("POST /api/v1/deploys/{id}/cancel"), ops.join("\n"));
    for (const op of ops) {
      const [method, path] = op.split(" ") as [string, string];
      const url = new URL(path.replace("{id}", "00000000-0000-4000-8000-000000000000"), server.url);
      const abort = new AbortController();
      const res = await fetch(url, {
        method,
        signal: abort.signal,
        headers: { authorization: "Bearer openapi-test-token-123", "content-type": "application/json" },
        ...(method === "POST" && { body: "{}" }),
      });
      // An event stream never ends by itself: answering with the stream's type is enough.
      if (res.headers.get("content-type")?.startsWith("text/event-stream")) {
        assert.equal(res.status, 200, op);
        abort.abort();
        continue;
      }
      const text = await res.text();
      assert.doesNotMatch(text, /"no route /, `${op} is documented but the server has no such route`);
    }
    // And a route that is not documented is not served.
    const res = await fetch(new URL("/api/v1/undocumented", server.url), { headers: { authorization: "Bearer openapi-test-token-123" } });
    assert.equal(res.status, 404);
  });

  it("is a well-formed OpenAPI 3.1 document: every operation has responses, every $ref resolves", () => {
    assert.equal(doc.openapi, "3.1.0");
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!methods.has(method)) continue;
        assert.ok(op.responses && Object.keys(op.responses).length > 0, `${method} ${path} has no responses`);
        for (const name of path.match(/\{(\w+)\}/g) ?? []) {
          const param = name.slice(1, -1);
          assert.ok(
            (op.parameters as { name: string; in: string }[] | undefined)?.some((p) => p.name === param && p.in === "path"),
            `${method} ${path} does not document its path parameter ${param}`,
          );
        }
      }
    }
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(refs.length > 0);
    for (const ref of refs) assert.ok(doc.components?.schemas?.[ref], `$ref to missing schema ${ref}`);
    // Errors are documented with their shape.
    assert.ok(doc.components?.schemas?.Error);
  });
});
