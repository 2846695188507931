import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * The hostile inputs the issue names, each answered 4xx with a message naming the field, nothing
 * recorded: NUL and lone surrogates, bad `?limit=`, `%00`, a YAML alias bomb, a rollback's `to`.
 */
describe("hostile input", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(new URL(path, server.url), {
      method,
      ...(body !== undefined && {
        headers: { "content-type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    });
    return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
  };
  const recorded = async () => (await server.api.list({ limit: "1000" })).deploys.length;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "hello\n");
    await ws.write("envconfig/untenanted/app/app/test.yml", {
      plugin: "noop",
      targets: [{ host: "a" }],
      params: { state_dir: ws.path("state") },
    });
    const bomb = ["plugin: noop", "targets: [{host: a}]", 'x0: &x0 ["a","a","a","a","a","a","a","a","a"]'];
    for (let i = 1; i < 12; i++)
      bomb.push(
        `x${i}: &x${i} [${Array(9)
          .fill(`*x${i - 1}`)
          .join(",")}]`,
      );
    await ws.write("envconfig/untenanted/bomb/bomb/test.yml", bomb.join("\n") + "\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("NUL bytes and lone surrogates in artifact.type, descriptor_file and a rollback's to: 400 naming the field", async () => {
    const before = await recorded();
    const d = descriptor("app", "test", artifact);
    const cases: [string, unknown, RegExp][] = [
      [
        "/api/v1/deploys",
        { descriptor: { ...d, artifact: { ...(d.artifact as object), type: "fi\u0000le" } } },
        /artifact\.type: contains a NUL character/,
      ],
      [
        "/api/v1/deploys",
        { descriptor: { ...d, artifact: { ...(d.artifact as object), type: "\ud800" } } },
        /artifact\.type: contains a lone UTF-16 surrogate/,
      ],
      ["/api/v1/deploys", { descriptor: d, descriptor_file: "a\u0000.yml" }, /descriptor_file: must not contain NUL/],
      [
        "/api/v1/deploys",
        { descriptor: d, descriptor_file: "\udc00" },
        /descriptor_file: must not contain NUL, control characters or lone surrogates/,
      ],
      ["/api/v1/rollbacks", { descriptor: d, to: "1.0\u0000" }, /to: must be letters, digits/],
      ["/api/v1/rollbacks", { descriptor: d, to: "\ud800" }, /to: must be letters, digits/],
      ["/api/v1/rollbacks", { descriptor: d, to: "../x" }, /to: must be letters, digits/],
      ["/api/v1/rollbacks", { descriptor: d, to: "/etc/passwd" }, /to: must be letters, digits/],
      ["/api/v1/rollbacks", { descriptor: d, to: "1".repeat(1000) }, /to: must be at most 128 characters/],
      ["/api/v1/deploys", { descriptor: { ...d, junk: "\u0000" } }, /descriptor\.junk: contains a NUL character/],
      ["/api/v1/deploys", { descriptor: { ...d, artifact: "file" } }, /artifact: expected a mapping, got a string/],
    ];
    for (const [path, body, message] of cases) {
      const r = await call("POST", path, body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 200)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error!.code, "invalid_argument");
      assert.match(r.body.error!.message, message);
    }
    // A megabyte `to` is past the 1 MiB body limit or the schema: refused either way, never passed on.
    const huge = await call("POST", "/api/v1/rollbacks", { descriptor: d, to: "1".repeat(1 << 20) });
    assert.equal(huge.status, 400);
    assert.equal(await recorded(), before);
  });

  it("?limit=-1, ?limit=1.5, %00 and malformed escapes in query values: 400", async () => {
    for (const query of [
      "limit=-1",
      "limit=1.5",
      "limit=abc",
      "limit=0",
      "limit=100000",
      "application=%00",
      "tenant=a%00b",
      "environment=%ff",
      "artifact=" + "a".repeat(100),
    ]) {
      const r = await call("GET", `/api/v1/deploys?${query}`);
      assert.equal(r.status, 400, `${query}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error!.code, "invalid_argument");
    }
    assert.equal((await call("GET", "/api/v1/deploys?limit=5&application=app")).status, 200);
    assert.equal((await call("GET", "/api/v1/deploys/%00")).status, 400);
  });

  it("a YAML alias bomb in an envconfig: 400 from the API and exit 2 from the CLI, naming the file", async () => {
    const before = await recorded();
    const r = await call("POST", "/api/v1/deploys", { descriptor: descriptor("bomb", "test", artifact) });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(r.body.error!.message, /envconfig\/untenanted\/bomb\/bomb\/test\.yml: malformed YAML: .*alias/i);
    const file = await ws.write("bomb.yml", { ...descriptor("bomb", "test", "dist/app.txt") });
    const cli = await runCli(["deploy", "-f", file], { cwd: ws.dir, server: server.url });
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /envconfig\/untenanted\/bomb\/bomb\/test\.yml: malformed YAML/);
    assert.equal(await recorded(), before);
  });

  it("the CLI refuses an oversized descriptor before reading it whole, naming the file", async () => {
    const file = await ws.write("huge.yml", `apiVersion: manent/v1\n# ${"x".repeat(2 << 20)}\n`);
    const r = await runCli(["deploy", "-f", file], { cwd: ws.dir, server: server.url });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /huge\.yml: \d+ bytes, larger than a descriptor may be/);
  });
});
