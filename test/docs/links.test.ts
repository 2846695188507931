import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";

/** Markdown files of the documentation: docs/ and the top-level pages. */
function pages(): string[] {
  const out = ["README.md", "CONTRIBUTING.md"].map((f) => join(repoRoot, f));
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith(".md")) out.push(join(dir, e.name));
    }
  };
  walk(join(repoRoot, "docs"));
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");

describe("documentation links", () => {
  it("every relative link reaches a file, and every #anchor a heading of it", () => {
    const broken: string[] = [];
    for (const page of pages()) {
      // Links outside code blocks: [text](target).
      const text = readFileSync(page, "utf8").replace(/^```[\s\S]*?^```/gm, "");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue; // http(s), mailto
        const [path, anchor] = target!.split("#");
        const file = path ? join(dirname(page), path) : page;
        const where = `${relative(repoRoot, page)}: ${target}`;
        if (!existsSync(file)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor && file.endsWith(".md")) {
          const headings = [...readFileSync(file, "utf8").matchAll(/^#+ (.+)$/gm)].map((m) => anchorOf(m[1]!));
          if (!headings.includes(anchor)) broken.push(`${where} (no such heading)`);
        }
      }
    }
    assert.deepEqual(broken, []);
  });
});
