import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { it } from "node:test";
import { promisify } from "node:util";
import { repoRoot } from "../support/server-process.js";

/**
 * The published API description passes Redocly's recommended rules with neither error nor warning
 * (the few findings that are true by design are listed with their reasons in .redocly.lint-ignore.yaml).
 * test/docs/references.test.ts checks that docs/reference/openapi.json is the one the code serves.
 */
it("docs/reference/openapi.json is clean under redocly lint", async () => {
  const redocly = join(repoRoot, "node_modules", ".bin", "redocly");
  const run = await promisify(execFile)(redocly, ["lint", "--format", "json", "docs/reference/openapi.json"], {
    cwd: repoRoot,
    // The linter's usage telemetry has nowhere to go from a test machine.
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    maxBuffer: 16 << 20,
  }).catch((err: { stdout?: string; stderr?: string }) => err);
  const report = JSON.parse(run.stdout ?? "{}") as {
    totals?: Record<string, number>;
    problems?: { ruleId: string; message: string; location: { pointer: string }[] }[];
  };
  const problems = (report.problems ?? []).map((p) => `${p.ruleId}: ${p.message} (${p.location.map((l) => l.pointer).join(", ")})`);
  assert.ok(report.totals, `redocly printed no report: ${run.stderr ?? ""}`);
  assert.deepEqual(problems, []);
  assert.equal(report.totals.errors, 0);
  assert.equal(report.totals.warnings, 0);
});
