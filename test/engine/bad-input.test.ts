import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Bad input, through the real CLI and server: each is refused with exit code 2 and a message that
 * names the file, the field and the reason, and nothing changes — no deploy recorded, no target touched.
 */
describe("bad input", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  const goodEnvconfig = () => ({ plugin: "noop", targets: [{ host: "a" }], params: { state_dir: ws.path("state") } });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "payload\n");
    await ws.write("envconfig/untenanted/shop/shop/test.yml", goodEnvconfig());
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  /** Deploys a descriptor (text or object) and asserts the refusal, and that nothing was recorded or touched. */
  async function refused(d: string | object, message: RegExp, extraArgs: string[] = []): Promise<void> {
    const file = await ws.write(`d-${Math.random().toString(36).slice(2)}.yml`, typeof d === "string" ? d : stringify(d));
    const before = (await server.api.list({ limit: "1000" })).deploys.length;
    const r = await runCli(["deploy", "-f", file, ...extraArgs], { cwd: ws.dir, server: server.url });
    assert.equal(r.code, 2, `exit code; stdout: ${r.stdout} stderr: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal((await server.api.list({ limit: "1000" })).deploys.length, before, "a deploy was recorded");
    assert.equal(existsSync(ws.path("state")), false, "a target was touched");
  }
  const shop = (extra: Record<string, unknown> = {}, artifactExtra: Record<string, unknown> = {}) => {
    const d = descriptor("shop", "test", artifact) as { artifact: Record<string, unknown> };
    return { ...d, ...extra, artifact: { ...d.artifact, ...artifactExtra } };
  };
  async function withEnvconfig(envconfig: string | object, message: RegExp): Promise<void> {
    await ws.write("envconfig/untenanted/shop/shop/test.yml", envconfig);
    try {
      await refused(shop(), message);
    } finally {
      await ws.write("envconfig/untenanted/shop/shop/test.yml", goodEnvconfig());
    }
  }

  it("1. malformed descriptor YAML", () => refused("apiVersion: manent/v1\napplication: [shop\n", /d-\w+\.yml:\d+:\d+: malformed YAML/));
  it("2. unknown descriptor field", () => refused(shop({ enviroment: "test" }), /d-\w+\.yml: \(document\): unknown field "enviroment"/));
  it("3. missing application", () => refused({ ...shop(), application: undefined }, /d-\w+\.yml: application: is required/));
  it("4. wrong apiVersion", () => refused(shop({ apiVersion: "v2" }), /apiVersion: must be "manent\/v1"/));
  it("5. version with spaces", () => refused(shop({}, { version: "1.0 beta" }), /artifact\.version: must be letters, digits/));
  it("6. sha256 that is not hex", () => refused(shop({}, { sha256: "abc" }), /artifact\.sha256: must be 64 lower-case hex digits/));
  it("7. artifact source that does not exist", () =>
    refused(shop({}, { source: "/nope/app.txt" }), /artifact\.source: \/nope\/app\.txt does not exist/));
  it("8. descriptor file that does not exist", async () => {
    const r = await runCli(["deploy", "-f", ws.path("missing.yml")], { cwd: ws.dir, server: server.url });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /missing\.yml: file not found/);
  });
  it("9. missing envconfig", () =>
    refused(
      shop({ environment: "staging" }),
      /no envconfig for untenanted\/shop\/shop\/staging: none of \.\/envconfig\/untenanted\/shop\/shop\/staging\.yml exists/,
    ));
  it("10. malformed envconfig YAML", () =>
    withEnvconfig("plugin: noop\ntargets: {host: a\n", /envconfig\/untenanted\/shop\/shop\/test\.yml:\d+:\d+: malformed YAML/));
  it("11. unknown envconfig field", () =>
    withEnvconfig({ ...goodEnvconfig(), target: [] }, /test\.yml: \(document\): unknown field "target"/));
  it("12. unknown plugin", () =>
    withEnvconfig(
      { ...goodEnvconfig(), plugin: "kubernetz" },
      /test\.yml: plugin: unknown plugin "kubernetz" \(configured in manent\.yml: noop\)/,
    ));
  it("13. secret reference of an unknown kind", () =>
    withEnvconfig(
      { ...goodEnvconfig(), secrets: [{ name: "k", ref: "aws:kv/k" }] },
      /test\.yml: secrets\.0\.ref: must be "file:\/absolute\/path", "env:NAME", "vault:mount\/path#key" or "k8s:namespace\/name#key"/,
    ));
  it("13b. malformed vault: reference", () =>
    withEnvconfig(
      { ...goodEnvconfig(), secrets: [{ name: "k", ref: "vault:kv/k" }] },
      /test\.yml: secrets\.0\.ref: must be "vault:mount\/path#key" .*: the #key is missing/,
    ));
  it("14. secret file that does not exist", () =>
    withEnvconfig(
      { ...goodEnvconfig(), secrets: [{ name: "k", ref: "file:/nope/key" }] },
      /secrets\.0\.ref: secret "k": file \/nope\/key does not exist/,
    ));
  it("15. secret variable that is not set", () =>
    withEnvconfig(
      { ...goodEnvconfig(), secrets: [{ name: "k", ref: "env:MANENT_TEST_UNSET_VAR" }] },
      /secrets\.0\.ref: secret "k": environment variable MANENT_TEST_UNSET_VAR is not set/,
    ));
  it("16. malformed duration", () =>
    withEnvconfig({ ...goodEnvconfig(), retry_interval: "5 minutes" }, /retry_interval: "5 minutes" is not a duration/));
  it("17. parallel below 1", () => withEnvconfig({ ...goodEnvconfig(), parallel: 0 }, /test\.yml: parallel: Too small/));
  it("18. a param that is not a scalar", () =>
    withEnvconfig({ ...goodEnvconfig(), params: { replicas: { n: 2 } } }, /test\.yml: params\.replicas: /));
  it("19. a callback URL that is not http(s)", () =>
    withEnvconfig({ ...goodEnvconfig(), callbacks: [{ url: "ftp://hooks.example/x" }] }, /callbacks\.0\.url: must be an http\(s\) URL/));
  it("20. duplicate key in YAML", () =>
    refused("apiVersion: manent/v1\napplication: shop\napplication: shop\n", /malformed YAML: Map keys must be unique/));
  it("20a. two targets on one host (different ports) without names: refused naming both entries", () =>
    withEnvconfig(
      {
        ...goodEnvconfig(),
        targets: [
          { host: "127.0.0.1", port: 6443 },
          { host: "127.0.0.1", port: 6444 },
        ],
      },
      /envconfig\/untenanted\/shop\/shop\/test\.yml: targets\.1: same identity as targets\.0 \(host 127\.0\.0\.1\): give each a distinct name/,
    ));
  it("20b. two targets with one name, and a name equal to another target's host: refused", async () => {
    await withEnvconfig(
      { ...goodEnvconfig(), targets: [{ host: "a", name: "eu" }, { host: "b" }, { host: "c", name: "eu" }] },
      /test\.yml: targets\.2: same identity as targets\.0 \(name eu\): give each a distinct name/,
    );
    await withEnvconfig(
      { ...goodEnvconfig(), targets: [{ host: "web-1" }, { host: "10.0.0.2", name: "web-1" }] },
      /test\.yml: targets\.1: same identity as targets\.0 \(identity web-1\): give each a distinct name/,
    );
  });
  it("20c. a target name that is not a simple name", () =>
    withEnvconfig({ ...goodEnvconfig(), targets: [{ host: "a", name: "../x" }] }, /test\.yml: targets\.0\.name: must be letters, digits/));
  it("21a. an approval needing no approver", () =>
    withEnvconfig(
      { ...goodEnvconfig(), rollout: { canary: { steps: [{ approval: { approvers: { count: 0 } } }] } } },
      /test\.yml: rollout\.canary\.steps\.0\.approval\.approvers\.count: Too small: expected number to be >=1/,
    ));
  it("21b. an approval's allow_submitter that is not a boolean", () =>
    withEnvconfig(
      { ...goodEnvconfig(), rollout: { waves: { between: [{ approval: { approvers: { allow_submitter: "no" } } }] } } },
      /test\.yml: rollout\.waves\.between\.0\.approval\.approvers\.allow_submitter: expected true or false, got a string/,
    ));
  it("21c. an approval's groups listed twice", () =>
    withEnvconfig(
      { ...goodEnvconfig(), rollout: { canary: { steps: [{ approval: { approvers: { from_groups: ["rm", "rm"] } } }] } } },
      /test\.yml: rollout\.canary\.steps\.0\.approval\.approvers\.from_groups: lists a group twice/,
    ));
  it("21d. a drift.ignore field that is not a field path", () =>
    withEnvconfig(
      { ...goodEnvconfig(), drift: { ignore: [{ kind: "Deployment", fields: ["spec.replicas", "spec..template"] }] } },
      /test\.yml: drift\.ignore\.0\.fields\.1: "spec\.\.template" is not a field path: expected a name, found "\." at character 6/,
    ));
  it("21e. drift.ignore for a plugin that takes no ignore list", () =>
    withEnvconfig(
      { ...goodEnvconfig(), drift: { ignore: [{ kind: "Deployment", fields: ["spec.replicas"] }] } },
      /test\.yml: drift\.ignore: plugin noop does not take an ignore list/,
    ));
  it("21. --version override that is not a version", () => refused(shop(), /artifact\.version: must be letters/, ["--version", "../etc"]));

  it("22. a sha256 that is not the uploaded file's is refused before anything is recorded", async () => {
    const file = await ws.write("mismatch.yml", stringify(shop({}, { sha256: "0".repeat(64) })));
    const before = (await server.api.list({ limit: "1000" })).deploys.length;
    const r = await runCli(["deploy", "-f", file, "-o", "json"], { cwd: ws.dir, server: server.url });
    assert.equal(r.code, 2, r.stderr);
    assert.equal((await server.api.list({ limit: "1000" })).deploys.length, before, "a deploy was recorded");
    assert.match(r.stderr, /mismatch\.yml: artifact\.sha256: differs from the sha256 of the upload artifact\.source names/);
    assert.equal(existsSync(ws.path("state")), false);
  });
});

describe("bad manent.yml", () => {
  async function refusedConfig(config: object, message: RegExp): Promise<void> {
    const ws = await createWorkspace();
    const file = await ws.write("manent.yml", config);
    // An unexpected start is stopped, so a failed assertion cannot leave a server running.
    await assert.rejects(
      startServer(file, { cwd: ws.dir, freePort: false }).then(async (s) => {
        await s.stop();
        return s;
      }),
      message,
    );
    assert.equal(existsSync(ws.path("work")), false, "the server created its workdir");
  }

  it("refuses sqlite and says what to write instead", () =>
    refusedConfig(
      { ...manentYml(undefined), dbos: { database_url: "sqlite:manent.db" } },
      /manent\.yml: dbos\.database_url: "sqlite" is not supported: .*Write database_url: postgres:\/\/user:password@host:5432\/dbname .*or remove database_url to use the embedded Postgres/,
    ));
  it("refuses an external plugin that shadows a built-in", () =>
    refusedConfig(
      { ...manentYml(undefined), plugins: { noop: { external: { command: "/bin/true" } } } },
      /plugins\.noop: "noop" is a built-in plugin and cannot name an external one; use another name, such as noop-ext/,
    ));
  it("refuses an unknown built-in plugin", () =>
    refusedConfig({ ...manentYml(undefined), plugins: { terraform: {} } }, /plugins\.terraform: unknown built-in plugin "terraform"/));
  it("refuses an unknown top-level field", () =>
    refusedConfig({ ...manentYml(undefined), listn: "x" }, /manent\.yml: \(document\): unknown field "listn"/));
  it("refuses an open API on a public address", () =>
    refusedConfig(
      { ...manentYml(undefined), listen: "0.0.0.0:8080" },
      /auth\.tokens: no API token is configured, so the API may only listen on a loopback address/,
    ));
});
