import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compareOutput, parsePage } from "./doc-runner.js";

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
    ].join("\n");
    assert.deepEqual(parsePage(page), [
      { kind: "run", line: 2, code: "manent deploy -f hello.yml\n", exit: 1, background: false, expected: "failed\n" },
      { kind: "file", line: 9, path: "manent.yml", content: "workdir: ./work\n" },
      { kind: "repo", line: 12, path: "examples/quickstart/hello.yml", content: "apiVersion: manent/v1\n" },
      { kind: "run", line: 18, code: "manent-server -c manent.yml serve\n", exit: 0, background: true },
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
    // A running step's line depends on timing: ignored on both sides.
    assert.equal(compareOutput("  … fetch\n  ✓ fetch (1ms)\n", "  ✓ fetch (1ms)\n"), undefined);
  });
});
