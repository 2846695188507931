import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { generateReferences, repoRoot } from "../../scripts/docs/references.js";
import { rolesTable } from "../../scripts/docs/roles-reference.js";

/**
 * The reference pages are generated from the code (`npm run docs`); a checked-in page that differs
 * from what the code generates now is a reference that lies, so CI fails on it.
 */
describe("generated references", () => {
  it("docs/reference is what `npm run docs` generates from the code", async () => {
    const { files } = await generateReferences();
    const stale: string[] = [];
    for (const [path, content] of files) {
      const current = await readFile(join(repoRoot, path), "utf8").catch(() => "(missing)");
      if (current !== content) stale.push(path);
    }
    const extra = (await readdir(join(repoRoot, "docs/reference"))).map((n) => `docs/reference/${n}`).filter((p) => !files.has(p));
    assert.deepEqual({ stale, extra }, { stale: [], extra: [] }, "run `npm run docs` and commit docs/reference");
  });

  it("every configuration key, command and flag has a description", async () => {
    const { undocumented } = await generateReferences();
    assert.deepEqual(undocumented, [], "give these a .describe() in their zod schema, or help text in the commander definition");
  });

  it("the references show what the code defines", async () => {
    const { files } = await generateReferences();
    // Spot checks that the generators read the definitions, not a copy of them.
    assert.match(files.get("docs/reference/envconfig.md")!, /^\| `retry_interval` \| duration \| `1s` \| First wait between retries/m);
    assert.match(files.get("docs/reference/manent-yml.md")!, /^\| `plugins\.<name>\.external\.start_timeout` \| duration \| `1m` \|/m);
    assert.match(files.get("docs/reference/cli.md")!, /^\| `--dry-run` \| resolve, fetch, validate/m);
    assert.match(files.get("docs/reference/metrics.md")!, /^\| `manent_deploys_total` \| counter \| `kind`, `status` \|/m);
    assert.match(files.get("docs/reference/errors.md")!, /^\| `invalid_argument` \| 3 \| 400 \| yes \| 2 \|/m);
    assert.match(files.get("docs/reference/errors.md")!, /^\| 1 \| DeployFailed \|/m);
  });

  it("docs/operations/security.md shows the roles and actions the code defines", async () => {
    const page = await readFile(join(repoRoot, "docs/operations/security.md"), "utf8");
    assert.ok(
      page.includes(`\n${rolesTable()}\n`),
      `security.md must contain, as printed by scripts/docs/roles-reference.ts:\n${rolesTable()}`,
    );
  });
});
