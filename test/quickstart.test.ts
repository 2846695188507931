import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readlink } from "node:fs/promises";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { repoRoot } from "./support/server-process.js";

/**
 * The README's first command after `npm ci`: examples/quickstart/run.sh, from a fresh state
 * (no embedded Postgres), on a free port given with its --port argument (the machine is shared).
 */
async function freePort(): Promise<number> {
  const srv = createServer().listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address() as { port: number };
  srv.close();
  return port;
}

describe("quickstart", () => {
  it("deploys hello three times, rolls the third back and lists all three", async () => {
    // The quickstart's workdir and targets (examples/quickstart) are shared with the test of
    // docs/getting-started.md, which holds this lock while it uses them. A previous run's targets
    // (here, web-1 on 1.0.0 already) are emptied by run.sh: the first deploy deploys.
    const fresh =
      "rm -rf examples/quickstart/work && mkdir -p examples/quickstart/targets/web-1/releases/1.0.0 && " +
      `ln -sfn releases/1.0.0 examples/quickstart/targets/web-1/current && exec bash examples/quickstart/run.sh --port ${await freePort()}`;
    const child = spawn("flock", ["-o", "/tmp/manent-port-8080.lock", "bash", "-c", fresh], {
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
      assert.match(await readlink(`${repoRoot}examples/quickstart/targets/${host}/current`), /releases\/1\.1\.0$/);
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
