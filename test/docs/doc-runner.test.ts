import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { compareOutput, parsePage } from "./doc-runner.js";
import { renderTerminal, TerminalSession } from "./terminal-session.js";

describe("doc runner", () => {
  it("reads runnable blocks, their outputs, files to write and files to compare", () => {
    const page = [
      "# Title",
      "```sh runnable exit=1",
      "manent deploy -f hello.yml",
      "```",
      "text",
      "```output",
      "failed",
      "```",
      "```yaml file=manent.yml",
      "workdir: ./work",
      "```",
      "```yaml repo=examples/quickstart/hello.yml",
      "apiVersion: manent/v1",
      "```",
      "```sh",
      "not run",
      "```",
      "```sh runnable background",
      "manent-server -c manent.yml serve",
      "```",
      '```sh runnable background ready="Root Token:"',
      "vault server -dev",
      "```",
    ].join("\n");
    assert.deepEqual(parsePage(page), [
      { kind: "run", line: 2, code: "manent deploy -f hello.yml\n", exit: 1, background: false, expected: "failed\n" },
      { kind: "file", line: 9, path: "manent.yml", content: "workdir: ./work\n" },
      { kind: "repo", line: 12, path: "examples/quickstart/hello.yml", content: "apiVersion: manent/v1\n" },
      { kind: "run", line: 18, code: "manent-server -c manent.yml serve\n", exit: 0, background: true },
      { kind: "run", line: 21, code: "vault server -dev\n", exit: 0, background: true, ready: "Root Token:" },
    ]);
  });

  it("refuses an output block that follows no runnable block", () => {
    assert.throws(() => parsePage("```output\nx\n```\n"), /line 1: an output block must follow a runnable block/);
  });

  it("matches placeholders and elided lines, and nothing else", () => {
    const expected = "deploy of hello 1.0.0 → test  [<id>]\n...\n  ✓ deploy (<n>ms)\n<time>\t<sha256>\nsucceeded: <any>!\n";
    const actual =
      "deploy of hello 1.0.0 → test  [0dfad410-2d04-49bd-8a5c-e77160ef72f4]\n  ✓ resolve (3ms)\n  … deploy\n  ✓ deploy (12ms)  \n" +
      `2026-12-01T01:21:39.357Z\t${"ab".repeat(32)}\nsucceeded: all (2 targets)!\n\n`;
    assert.equal(compareOutput(expected, actual), undefined);
    assert.match(compareOutput(expected, actual.replace("12ms", "12s"))!, /output differs/);
    assert.match(compareOutput("a\nb\n", "a\nb\nc\n")!, /--- actual\na\nb\nc\n---/);
    assert.match(compareOutput("<sha256>\n", "abc\n")!, /output differs/);
    // A tab is what a terminal shows for it: spaces up to the next tab stop.
    assert.equal(compareOutput("ID\tSTATUS\n<id>\tsucceeded\n", "ID      STATUS\nabc     succeeded\n"), undefined);
    assert.match(compareOutput("ID\tSTATUS\n", "IDSTATUS\n")!, /output differs/);
    // A running step's line depends on timing: ignored on both sides.
    assert.equal(compareOutput("  … fetch\n  ✓ fetch (1ms)\n", "  ✓ fetch (1ms)\n"), undefined);
  });
});

describe("terminal session", () => {
  it("runs blocks in a terminal with only the environment it was given, and shows what the screen shows", async () => {
    const home = await mkdtemp(join(tmpdir(), "manent-doc-runner-"));
    const session = new TerminalSession(home, { PATH: "/usr/bin:/bin", TERM: "xterm-256color", LANG: "C.UTF-8" }, home);
    try {
      const tty = await session.run("[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo terminal; echo out | cat");
      assert.deepEqual(tty, { output: "terminal\nout", status: 0 });
      // bash's own variables (PWD, SHLVL, _) beside the given ones; nothing of the test process.
      const env = await session.run("env | cut -d= -f1 | sort | tr '\\n' ' '");
      assert.equal(env.output, "HOME LANG PATH PWD SHLVL TERM _");
      await session.run("export GREETING=hello; cd /");
      assert.equal((await session.run('echo "$GREETING from $PWD"')).output, "hello from /");
      // A redrawn line once, colours gone, a tab as spaces, the home as /home/you.
      const screen = await session.run(`printf 'working\\rdone   \\n\\033[32mok\\033[0m\\tnext\\n%s\\n' "$HOME"`);
      assert.equal(screen.output, "done\nok      next\n/home/you");
      assert.equal((await session.run("false")).status, 1);
      // A background server is ready when it prints its own words; one that exits first fails.
      await session.startBackground(`sh -c 'echo starting; sleep 0.2; echo "Root Token: x"; exec sleep 60'`, "Root Token:");
      await assert.rejects(session.startBackground("sh -c 'echo bye'", "Root Token:"), /the background block exited/);
    } finally {
      await session.close();
      await rm(home, { recursive: true, force: true });
    }
  });

  it("renders carriage returns and cursor movements as a terminal does", async () => {
    assert.equal(await renderTerminal("a\r\nstep 1\rstep 2\r\n\u001b[1A\u001b[2Kredrawn\r\n"), "a\nredrawn");
  });
});

describe("terminal session that hangs", () => {
  it("fails a block that does not finish, refuses the next, and closes the terminal", async () => {
    const home = await mkdtemp(join(tmpdir(), "manent-doc-runner-"));
    const session = new TerminalSession(home, { PATH: "/usr/bin:/bin" }, home, ["flock", "-o", join(home, "lock")]);
    try {
      await assert.rejects(session.run("read line", 500), /did not finish within 0.5s/);
      await assert.rejects(session.run("echo next"), /still running an earlier block \(read line\)/);
    } finally {
      await session.close();
    }
    // The terminal is gone, and with it the lock the wrapper held.
    execFileSync("flock", ["-n", join(home, "lock"), "true"]);
    await rm(home, { recursive: true, force: true });
  });
});
