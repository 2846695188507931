import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { cliBin, serverBin, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);

/**
 * The tutorial's commands word for word, through a real shell and a real pipe: `manent` on PATH,
 * stdout a pipe (so JSON, no `-o json`), jq reading it; a reader that quits early (head) ends the
 * CLI quietly; and manent.yml's `dbos:` with no value runs the embedded Postgres.
 */
describe("tutorial commands through a shell pipe", () => {
  let ws: Workspace;
  let server: ServerProcess;
  let bin: string;

  /** Runs a command line in bash from the tutorial's directory, as a reader would type it. */
  const shell = async (line: string) => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env.PATH}`, MANENT_SERVER: server.url };
    delete env.MANENT_OUTPUT;
    try {
      const r = await run("bash", ["-o", "pipefail", "-c", line], { cwd: ws.dir, env, timeout: 120_000 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
    }
  };

  before(async () => {
    ws = await createWorkspace("manent-tutorial-");
    bin = ws.path("bin");
    await mkdir(bin);
    for (const [name, target] of [
      ["manent", cliBin],
      ["manent-server", serverBin],
    ]) {
      await writeFile(`${bin}/${name}`, `#!/bin/sh\nexec "${process.execPath}" "${target}" "$@"\n`);
      await chmod(`${bin}/${name}`, 0o755);
    }
    await ws.write("dist/hello-1.0.0.txt", "hello 1.0.0\n");
    await ws.write(
      "envconfig/untenanted/hello/hello/test.yml",
      "plugin: noop\ntargets:\n  - host: 127.0.0.1\nparams:\n  state_dir: " + ws.path("state") + "\nrollback:\n  enabled: true\n",
    );
    // As in the tutorial, with database_url removed: `dbos:` and nothing under it.
    const config = await ws.write(
      "manent.yml",
      [
        "dbos:",
        "workdir: ./work",
        "plugins:",
        "  noop: {artifact_types: [file]}",
        "envconfig:",
        "  required: true",
        "  providers:",
        "    - name: default",
        "      type: file",
        "      file:",
        '        path: "./envconfig/{tenant}/{application}/{artifact}/{environment}.yml"',
        "",
      ].join("\n"),
    );
    await ws.write(
      "hello.yml",
      [
        "apiVersion: manent/v1",
        "application: hello",
        "environment: test",
        "artifact:",
        "  type: file",
        "  name: hello",
        "  version: 1.0.0",
        `  source: ${ws.path("dist/hello-1.0.0.txt")}`,
        "",
      ].join("\n"),
    );
    server = await startServer(config, { cwd: ws.dir });
    // The port is bound before the database starts: wait for the server to be ready, then look at what it started.
    while ((await fetch(new URL("/healthz", server.url))).status !== 200) await new Promise((r) => setTimeout(r, 100));
    assert.ok(existsSync(ws.path("work", "postgres", "password")), "dbos: with no value is the embedded Postgres under workdir");
  });
  after(async () => {
    await server?.stop();
  });

  it("manent deploy -f hello.yml --dry-run | jq '.steps[] | select(.name==\"deploy\") | .output.result | fromjson'", async () => {
    const r = await shell(`manent deploy -f hello.yml --dry-run | jq '.steps[] | select(.name=="deploy") | .output.result | fromjson'`);
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(r.stdout) as { plugin: string; targets: { host: string; status: string; details: Record<string, string> }[] };
    assert.equal(result.plugin, "noop");
    assert.deepEqual(
      result.targets.map((t) => [t.host, t.status, t.details.version]),
      [["127.0.0.1", "ready", "1.0.0"]],
    );
  });

  it('manent deploy -f hello.yml, then --version 1.1.0 --source "$PWD/dist/hello-1.1.0.txt", each a JSON record on a pipe', async () => {
    const first = await shell(`manent deploy -f hello.yml | jq -r .status`);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, "succeeded\n");
    await ws.write("dist/hello-1.1.0.txt", "hello 1.1.0\n");
    const second = await shell(
      `manent deploy -f hello.yml --version 1.1.0 --source "$PWD/dist/hello-1.1.0.txt" | jq -r '.version, .status'`,
    );
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, "1.1.0\nsucceeded\n");
    const history = await shell(`manent history | jq -r '.[0].version'`);
    assert.equal(history.stdout, "1.1.0\n");
  });

  it("a reader that stops early (head) ends the CLI quietly, with no EPIPE crash", async () => {
    // `true` has gone before the CLI writes: its write meets a closed pipe (EPIPE).
    for (const line of ["manent history --limit 50 | true", "manent deploy -f hello.yml --dry-run | true", "manent plugins | true"]) {
      const r = await shell(`${line}; echo "exit=\${PIPESTATUS[0]}"`);
      assert.equal(r.stdout, "exit=0\n", line);
      assert.equal(r.stderr, "", line);
    }
    const head = await shell(`manent deploy -f hello.yml --dry-run | head -n 1; echo "exit=\${PIPESTATUS[0]}"`);
    assert.match(head.stdout, /^\{\nexit=0\n$/);
    assert.equal(head.stderr, "");
  });

  it("text on request (-o text, MANENT_OUTPUT=text), as on a terminal", async () => {
    const r = await shell(`manent history -o text | head -n 1`);
    assert.equal(r.stdout.split("\t")[0], "CREATED");
    const env = await shell(`MANENT_OUTPUT=text manent deploy -f hello.yml --dry-run | tail -n 1`);
    assert.equal(env.stdout, "succeeded\n");
  });
});
