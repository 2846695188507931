import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { runCli, startServer, type CliResult, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const token = "cli-test-token-42";
const hasJq = spawnSync("jq", ["--version"]).status === 0;

/** The real `manent` CLI against a real manent-server: output, overrides, exit codes, history, rollback. */
describe("manent CLI", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;

  const cli = (...args: string[]): Promise<CliResult> => runCli(args, { cwd: ws.dir, server: server.url, token });
  const json = <T = DeployRecord>(r: CliResult): T => {
    assert.equal(r.stderr, "", r.stderr);
    return JSON.parse(r.stdout) as T;
  };
  const release = (host: string) => readFile(ws.path("state", `${host}.release`), "utf8");
  const app = async (name: string, envconfig: Record<string, unknown> = {}, version = "1.0.0") => {
    await ws.write(`envconfig/untenanted/${name}/${name}/test.yml`, {
      plugin: "noop",
      targets: [{ host: `${name}-1` }, { host: `${name}-2` }],
      ...envconfig,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...(envconfig.params as object) },
    });
    return ws.write(`${name}.yml`, {
      apiVersion: "manent/v1",
      application: name,
      environment: "test",
      artifact: { type: "file", name, version, source: "dist/app.txt" },
    });
  };
  const freePort = () =>
    new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("dist/app.txt", "one\n");
    await ws.write("dist/app-2.txt", "two\n");
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: { tokens: [{ name: "ci", tenant: "*", sha256: createHash("sha256").update(token).digest("hex") }] },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("prints each step and each target, and ends with succeeded", async () => {
    const file = await app("text");
    const r = await cli("deploy", "-f", file, "-o", "text");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.match(lines[0]!, /^deploy of text 1\.0\.0 → test {2}\[[0-9a-f-]{36}\]$/);
    for (const step of ["resolve", "fetch", "validate", "checkpoint", "deploy"]) {
      assert.ok(
        lines.some((l) => new RegExp(`^ {2}✓ ${step} \\(\\d+ms\\)$`).test(l)),
        `no ✓ ${step} in:\n${r.stdout}`,
      );
    }
    for (const host of ["text-1", "text-2"])
      assert.ok(
        lines.some((l) => new RegExp(`^ {6}${host}: deployed \\d+ms$`).test(l)),
        `no ${host} in:\n${r.stdout}`,
      );
    assert.equal(lines.at(-1), "succeeded");
    assert.equal(await release("text-2"), "1.0.0");
  });

  it("prints the deploy as JSON with -o json, the deploy step's result a JSON string", async () => {
    const file = await app("json");
    const r = await cli("deploy", "-f", file, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const d = json(r);
    assert.equal(d.status, "succeeded");
    assert.match(d.id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      d.steps.map((s) => s.name),
      ["resolve", "fetch", "validate", "checkpoint", "deploy"],
    );
    for (const s of d.steps) {
      assert.deepEqual(Object.keys(s).sort(), ["attempts", "duration_ms", "error", "name", "output", "started_at", "status"]);
      assert.equal(s.status, "succeeded");
      assert.equal(s.attempts, 1);
      assert.equal(s.error, null);
      assert.equal(typeof s.output?.result, "string");
      assert.ok(!Number.isNaN(Date.parse(s.started_at!)));
      assert.equal(typeof s.duration_ms, "number");
    }
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as {
      plugin: string;
      targets: { host: string; status: string }[];
    };
    assert.equal(result.plugin, "noop");
    assert.deepEqual(
      result.targets.map((t) => `${t.host}:${t.status}`),
      ["json-1:deployed", "json-2:deployed"],
    );

    if (hasJq) {
      const jq = spawnSync("jq", ["-c", '.steps[] | select(.name=="deploy") | .output.result | fromjson'], {
        input: r.stdout,
        encoding: "utf8",
      });
      assert.equal(jq.status, 0, jq.stderr);
      assert.deepEqual(JSON.parse(jq.stdout), result);
    }
  });

  it("dry-runs with --dry-run and changes nothing", async () => {
    const file = await app("dry");
    const r = await cli("deploy", "-f", file, "--dry-run", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const d = json(r);
    assert.equal(d.kind, "dry_run");
    assert.equal(d.status, "succeeded");
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as { targets: { status: string }[] };
    assert.deepEqual(
      result.targets.map((t) => t.status),
      ["ready", "ready"],
    );
    await assert.rejects(release("dry-1"), /ENOENT/);
    const text = await cli("deploy", "-f", file, "--dry-run", "-o", "text");
    assert.equal(text.code, 0);
    assert.match(text.stdout, /^dry-run of dry 1\.0\.0 → test/);
  });

  it("deploys another version and source with --version and --source", async () => {
    const file = await app("over");
    const r = await cli("deploy", "-f", file, "--version", "2.0.0", "--source", "dist/app-2.txt", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const d = json(r);
    assert.equal(d.version, "2.0.0");
    const fetched = JSON.parse(d.steps.find((s) => s.name === "fetch")!.output!.result) as {
      version: string;
      sha256: string;
      source: string;
    };
    assert.equal(fetched.version, "2.0.0");
    // The local file reached the server as an upload, named by its sha256.
    const sha256 = createHash("sha256").update("two\n").digest("hex");
    assert.equal(fetched.source, `upload:${sha256}/app-2.txt`);
    assert.equal(fetched.sha256, sha256);
    assert.equal(await release("over-1"), "2.0.0");
  });

  it("exits 1 when a deploy fails and is rolled back", async () => {
    const file = await app("bad", { rollback: { enabled: true } });
    assert.equal((await cli("deploy", "-f", file)).code, 0);
    await app("bad", { rollback: { enabled: true }, params: { fail_hosts: "bad-2" } });
    const r = await cli("deploy", "-f", file, "--version", "2.0.0", "-o", "text");
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^ {2}✗ deploy/m);
    assert.match(r.stdout, /^ {2}✓ rollback/m);
    assert.match(r.stdout.trimEnd().split("\n").at(-1)!, /^rolled_back: target bad-2: failing as configured.*; rollback completed$/);
    assert.equal(await release("bad-1"), "1.0.0");
    assert.equal(await release("bad-2"), "1.0.0");
  });

  it("exits 2 on bad input, and records nothing", async () => {
    const before = json<unknown[]>(await cli("history", "-o", "json", "--limit", "1000")).length;
    const noEnvconfig = await ws.write("lost.yml", {
      apiVersion: "manent/v1",
      application: "lost",
      environment: "test",
      artifact: { type: "file", name: "lost", version: "1", source: "dist/app.txt" },
    });
    const invalid = await ws.write("invalid.yml", { apiVersion: "manent/v1", application: "x" });
    const cases: [string[], RegExp][] = [
      [["deploy", "-f", ws.path("missing.yml")], /missing\.yml: file not found/],
      [["deploy", "-f", invalid], /invalid\.yml: .*(environment|artifact)/],
      [["deploy", "-f", noEnvconfig], /lost/],
      [["deploy", "-f", noEnvconfig, "--bogus-flag"], /unknown option/],
      [["deploy"], /required option/],
      [["status", "00000000-0000-0000-0000-000000000000"], /not found/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(...args);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.code}\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr, message, args.join(" "));
    }
    assert.equal(json<unknown[]>(await cli("history", "-o", "json", "--limit", "1000")).length, before);
  });

  it("exits 2 on a server address without a scheme, from --server and from MANENT_SERVER", async () => {
    const host = server.url.replace(/^http:\/\//, "");
    const fromFlag = await runCli(["--server", host, "history"], { cwd: ws.dir, token });
    assert.equal(fromFlag.code, 2, fromFlag.stderr);
    assert.match(fromFlag.stderr, /--server.*add http:\/\/ or https:\/\//s);
    assert.doesNotMatch(fromFlag.stderr, /Invalid URL|cannot reach/);
    const fromEnv = await runCli(["history"], { cwd: ws.dir, server: host, token });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(fromEnv.stderr, /MANENT_SERVER.*add http:\/\/ or https:\/\//s);
  });

  it("exits 3 when the server cannot be reached or refuses the token", async () => {
    const file = await app("unreach");
    const down = await runCli(["deploy", "-f", file], { cwd: ws.dir, server: `http://127.0.0.1:${await freePort()}`, token });
    assert.equal(down.code, 3, down.stderr);
    assert.match(down.stderr, /cannot reach manent-server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    const badToken = await runCli(["history"], { cwd: ws.dir, server: server.url, token: "wrong" });
    assert.equal(badToken.code, 3);
    assert.match(badToken.stderr, /unknown API token/);
    const noToken = await runCli(["plugins"], { cwd: ws.dir, server: server.url, env: { MANENT_TOKEN: "" } });
    assert.equal(noToken.code, 3);
    assert.match(noToken.stderr, /missing bearer token/);
  });

  it("lists history newest first with statuses, rolls back with and without --to, shows one deploy", async () => {
    const file = await app("hist");
    const ids: string[] = [];
    for (const v of ["1.0.0", "1.1.0", "1.2.0"]) {
      const d = json(await cli("deploy", "-f", file, "--version", v, "-o", "json"));
      assert.equal(d.status, "succeeded");
      ids.push(d.id);
    }
    // Without --to: the last good release before the current one.
    const back = json(await cli("rollback", "-f", file, "-o", "json"));
    assert.equal(back.kind, "rollback");
    assert.equal(back.status, "succeeded", JSON.stringify(back.error));
    assert.equal(back.version, "1.1.0");
    assert.equal(
      back.steps.some((s) => s.name === "fetch"),
      false,
    );
    assert.equal(await release("hist-1"), "1.1.0");
    const to = await cli("rollback", "-f", file, "--to", "1.0.0", "-o", "text");
    assert.equal(to.code, 0, to.stdout + to.stderr);
    assert.match(to.stdout, /^rollback of hist to 1\.0\.0 → test/);
    assert.equal(to.stdout.trimEnd().split("\n").at(-1), "succeeded");
    assert.equal(await release("hist-2"), "1.0.0");

    const h = await cli("history", "--application", "hist", "-o", "text");
    assert.equal(h.code, 0, h.stderr);
    const [header, ...rows] = h.stdout.trimEnd().split("\n");
    assert.equal(header, "CREATED\tID\tKIND\tAPPLICATION\tENVIRONMENT\tVERSION\tSTATUS");
    const cols = rows.map((r) => r.split("\t"));
    assert.deepEqual(
      cols.map((c) => `${c[2]} ${c[5]} ${c[6]}`),
      [
        "rollback 1.0.0 succeeded",
        "rollback 1.1.0 succeeded",
        "deploy 1.2.0 succeeded",
        "deploy 1.1.0 succeeded",
        "deploy 1.0.0 succeeded",
      ],
    );
    assert.deepEqual(
      cols.slice(2).map((c) => c[1]),
      [...ids].reverse(),
    );
    const created = cols.map((c) => Date.parse(c[0]!));
    assert.deepEqual(
      created,
      [...created].sort((a, b) => b - a),
    );

    const s = await cli("status", ids[0]!, "-o", "text");
    assert.equal(s.code, 0, s.stderr);
    assert.match(s.stdout, new RegExp(`^deploy of hist 1\\.0\\.0 → test {2}\\[${ids[0]}\\]`));
    assert.match(s.stdout, /^ {6}hist-1: deployed/m);
    assert.equal(s.stdout.trimEnd().split("\n").at(-1), "succeeded");
    const sj = json(await cli("status", ids[1]!, "-o", "json"));
    assert.equal(sj.id, ids[1]);
    assert.equal(sj.version, "1.1.0");
  });

  it("lists the plugins and their capabilities", async () => {
    const r = await cli("plugins", "-o", "text");
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^noop\tbuiltin\tdry_run, current_release, rollback, slots, traffic_router, testers, scale, parallel_targets, drift, header_route, mirror, session_affinity$/m,
    );
    const list = json<{ name: string; kind: string; capabilities: string[] }[]>(await cli("plugins", "-o", "json"));
    assert.deepEqual(
      list.find((p) => p.name === "noop"),
      {
        name: "noop",
        kind: "builtin",
        capabilities: [
          "dry_run",
          "current_release",
          "rollback",
          "slots",
          "traffic_router",
          "testers",
          "scale",
          "parallel_targets",
          "drift",
          "header_route",
          "mirror",
          "session_affinity",
        ],
      },
    );
  });
});
