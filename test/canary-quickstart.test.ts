import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, it } from "node:test";
import { haproxyBinary } from "./support/haproxy.js";
import { repoRoot } from "./support/server-process.js";

/**
 * The quickstart's second part, `npm run quickstart:canary` (examples/canary-quickstart/run.sh),
 * from a fresh state: HAProxy and manent-server on their documented ports (8090, 8081), two local
 * targets under /tmp/manent-canary-quickstart, hello 1.0.0 then a canary of 1.1.0 at 10, 50, 100.
 */
describe("canary quickstart", { skip: haproxyBinary ? false : "haproxy not installed (scripts/ci/haproxy.sh)" }, () => {
  it("rolls hello 1.1.0 out at 10%, 50%, 100% with manent status showing the weight, and promotes", async () => {
    // The lock keeps two runs (two test processes, a person trying it) off the same ports and targets.
    const fresh = "rm -rf /tmp/manent-canary-quickstart examples/canary-quickstart/work && exec bash examples/canary-quickstart/run.sh";
    const child = spawn("flock", ["-o", "/tmp/manent-canary-quickstart.lock", "bash", "-c", fresh], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0, `run.sh failed:\n${stdout}\n${stderr}`);

    assert.match(stdout, /^100 requests: 1\.0\.0: 100 \(100\.0%\)$/m, "1.0.0 serves everything after the first deploy");
    // At each pause: the status names the step and weight, and the shares measured through HAProxy match it.
    for (const weight of [10, 50, 100]) {
      const section = stdout.split(`-- paused at weight ${weight}\n`)[1]?.split("-- paused at")[0] ?? "";
      assert.match(section, new RegExp(`weight ${weight}%`), `manent status shows weight ${weight}`);
      const m = /^1000 requests: (.*)$/m.exec(section);
      assert.ok(m, `no share line at weight ${weight}:\n${section}`);
      assert.doesNotMatch(m[1]!, /HTTP|error/, "no request failed");
      const candidate = Number(/1\.1\.0: \d+ \(([\d.]+)%\)/.exec(m[1]!)?.[1] ?? 0);
      assert.ok(Math.abs(candidate - weight) <= 3, `1.1.0 answered ${candidate}% at weight ${weight}`);
      assert.ok(section.includes("10 requests with X-Canary: always: 1.1.0: 10 (100.0%)"), "testers reach the candidate");
    }
    const after = stdout.split("== after the promote\n")[1] ?? "";
    assert.match(after, /^1000 requests: 1\.1\.0: 1000 \(100\.0%\)$/m);
    assert.match(after, /^web-1: live slot \w+, current releases\/1\.1\.0$/m);
  });
});
