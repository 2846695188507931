import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readlink } from "node:fs/promises";
import { describe, it } from "node:test";
import { repoRoot } from "./support/server-process.js";

/**
 * The README's first command after `npm ci`: examples/quickstart/run.sh, from a fresh state
 * (no targets, no embedded Postgres). It uses port 8080 and /tmp/manent-quickstart, as documented.
 */
describe("quickstart", () => {
  it("deploys hello three times, rolls the third back and lists all three", async () => {
    // The targets under /tmp/manent-quickstart and the quickstart's workdir are shared with the
    // test of docs/getting-started.md: each holds this lock while it uses them.
    const fresh = "rm -rf /tmp/manent-quickstart examples/quickstart/work && exec bash examples/quickstart/run.sh";
    const child = spawn("flock", ["-o", "/tmp/manent-quickstart.lock", "bash", "-c", fresh], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0, `run.sh failed:\n${stdout}\n${stderr}`);

    // Three deploys, each followed to its end: two succeed, the third is rolled back.
    const sections = stdout.split(/^== /m).slice(1);
    assert.deepEqual(
      sections.map((s) => s.split("\n")[0]),
      [
        "deploy hello 1.0.0",
        "deploy hello 1.1.0",
        "deploy hello 1.2.0 (its activation fails: expect an automatic rollback)",
        "what the targets run",
        "manent history",
      ],
    );
    const last = (s: string) => s.trimEnd().split("\n").at(-1)!;
    for (const [i, version] of ["1.0.0", "1.1.0"].entries()) {
      assert.match(sections[i]!, new RegExp(`^deploy of hello ${version.replaceAll(".", "\\.")} → test {2}\\[`, "m"));
      assert.match(sections[i]!, /^ {6}web-1: deployed/m);
      assert.match(sections[i]!, /^ {6}web-2: deployed/m);
      assert.equal(last(sections[i]!), "succeeded");
    }
    assert.match(sections[2]!, /^ {2}✗ deploy/m);
    assert.match(sections[2]!, /^ {2}✓ rollback/m);
    assert.match(last(sections[2]!), /^rolled_back: .*rollback completed$/);

    // Both targets are back on 1.1.0.
    for (const host of ["web-1", "web-2"]) {
      assert.match(sections[3]!, new RegExp(`^${host}: (.*/)?releases/1\\.1\\.0$`, "m"));
      assert.match(await readlink(`/tmp/manent-quickstart/${host}/current`), /releases\/1\.1\.0$/);
    }

    // History, newest first: all three deploys with their status.
    const rows = sections[4]!
      .trimEnd()
      .split("\n")
      .slice(2)
      .map((r) => r.split("\t"));
    assert.deepEqual(
      rows.map((c) => `${c[2]} ${c[3]} ${c[5]} ${c[6]}`),
      ["deploy hello 1.2.0 rolled_back", "deploy hello 1.1.0 succeeded", "deploy hello 1.0.0 succeeded"],
    );
  });
});
