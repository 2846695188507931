import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { repoRoot } from "../support/server-process.js";

/** The Go version a page asks the reader for is the one the SDK's go.mod needs. */
it("names the Go version of sdk/go/go.mod wherever a page says which Go to install", () => {
  const needed = /^go (\d+\.\d+)/m.exec(readFileSync(join(repoRoot, "sdk/go/go.mod"), "utf8"))![1]!;
  const pages = [
    "README.md",
    "CONTRIBUTING.md",
    ...readdirSync(join(repoRoot, "docs"), { recursive: true, encoding: "utf8" })
      .filter((p) => p.endsWith(".md"))
      .map((p) => `docs/${p}`),
  ];
  const said = pages.flatMap((p) =>
    [...readFileSync(join(repoRoot, p), "utf8").matchAll(/\bGo (\d+\.\d+)/g)].map((m) => ({ page: p, version: m[1]! })),
  );
  assert.ok(
    said.some((s) => s.page === "docs/tutorials/external-plugin.md"),
    "the external plugin tutorial names no Go version",
  );
  assert.deepEqual(
    said.filter((s) => s.version !== needed),
    [],
    `go.mod needs Go ${needed}`,
  );
});
