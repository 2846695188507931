import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";

/**
 * A section that names its configuration key (a heading, or a paragraph led by a bold title, with
 * the key in backticks in parentheses right after the title) shows that key in each of its YAML blocks: a block moved
 * under another feature's heading, as when two sections' text and examples get interleaved, fails.
 */
interface Section {
  line: number;
  title: string;
  keys: string[];
  yaml: { line: number; text: string }[];
}

export function sectionsOf(markdown: string): Section[] {
  const sections: Section[] = [];
  const lines = markdown.split("\n");
  let current: Section | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^```(\S*)/.exec(line);
    if (fence) {
      const start = i;
      const body: string[] = [];
      while (++i < lines.length && !lines[i]!.startsWith("```")) body.push(lines[i]!);
      if (fence[1] === "yaml" && current) current.yaml.push({ line: start + 1, text: body.join("\n") });
      continue;
    }
    const heading = /^#{2,6} (.*)/.exec(line) ?? /^\*\*([^*]+)\*\*(.*)/.exec(line);
    if (heading) {
      const first = heading[0];
      // The key it names right after its title, in parentheses: "## Session affinity (`session_affinity: true`)" → session_affinity.
      const named = /^(?:#{2,6} [^(`]*|\*\*[^*]+\*\* )\(`([a-z_.]+)(?::[^`]*)?`/.exec(first);
      const keys = named ? [named[1]!.split(".").pop()!] : [];
      current = { line: i + 1, title: first, keys, yaml: [] };
      sections.push(current);
    }
  }
  return sections;
}

describe("YAML blocks stand under the section of their feature", () => {
  it("docs/plugins: every YAML block of a section that names its key holds that key", async () => {
    const dir = join(repoRoot, "docs/plugins");
    const problems: string[] = [];
    for (const name of await readdir(dir)) {
      if (!name.endsWith(".md")) continue;
      for (const s of sectionsOf(await readFile(join(dir, name), "utf8"))) {
        if (s.keys.length === 0) continue;
        for (const y of s.yaml)
          if (!s.keys.some((k) => new RegExp(`(^|[\\s{,-])${k}:`, "m").test(y.text)))
            problems.push(
              `docs/plugins/${name}:${y.line}: the YAML block under "${s.title.slice(0, 60)}" (line ${s.line}) has none of ${s.keys.join(", ")}`,
            );
      }
    }
    assert.deepEqual(problems, []);
  });

  it("catches a block under another feature's heading", () => {
    const page = "## Header routes (`set_header_route`)\n\n```yaml\nrollout:\n  canary:\n    session_affinity: true\n```\n";
    const [s] = sectionsOf(page);
    assert.deepEqual(s!.keys, ["set_header_route"]);
    assert.ok(!/(^|[\s{,-])set_header_route:/m.test(s!.yaml[0]!.text));
  });
});
