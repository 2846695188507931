import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";

/**
 * Every environment variable the code reads (src/ and the Go SDK) is documented in docs/: a
 * reader can learn what changes manent's behaviour without reading its source.
 */

function files(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(join(repoRoot, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && keep(e.name))
    .map((e) => join(e.parentPath, e.name));
}

const sources = [...files("src", (n) => /\.tsx?$/.test(n)), ...files("sdk/go", (n) => n.endsWith(".go") && !n.endsWith("_test.go"))].map(
  (path) => ({ path: relative(repoRoot, path), text: readFileSync(path, "utf8") }),
);
const everything = sources.map((s) => s.text).join("\n");

/** A name given through a constant (`process.env[ENV.clientCert]`, `os.Getenv(LogLevelEnv)`), or a loop over a list of names. */
function resolve(expr: string, text: string): string[] | undefined {
  const id = expr.split(".").at(-1)!;
  const constant = new RegExp(`\\b${id}\\s*[:=]\\s*"([A-Z][A-Z0-9_]*)"`).exec(everything);
  if (constant) return [constant[1]!];
  const list = new RegExp(`for (?:_, )?${id} := range (\\w+)|for \\(const ${id} of (\\w+)\\)`).exec(text);
  const name = list?.[1] ?? list?.[2];
  const items = name && new RegExp(`\\b${name}\\b[^=]*=\\s*(?:\\[\\]string\\{|\\[)([^}\\]]*)[}\\]]`).exec(everything);
  return items ? [...items[1]!.matchAll(/"([A-Z][A-Z0-9_]*)"/g)].map((m) => m[1]!) : undefined;
}

/** name -> where it is read. */
function variablesRead(): Map<string, string> {
  const read = new Map<string, string>();
  const literal = [
    /process\.env\.([A-Z][A-Z0-9_]*)/g,
    /process\.env\[\s*"([A-Z][A-Z0-9_]*)"\s*\]/g,
    /\benv\.([A-Z][A-Z0-9_]*)\b(?!\s*=(?!=))/g, // a ProcessEnv passed in (env = process.env), not one being built
    /\.env\(\s*"([A-Z][A-Z0-9_]*)"\s*\)/g, // commander's Option.env
    /os\.(?:Getenv|LookupEnv)\(\s*"([A-Z][A-Z0-9_]*)"\s*\)/g,
  ];
  const indirect = [
    /process\.env\[\s*([A-Za-z_][\w.]*)\s*\]/g,
    /\b(?:host|env)\[\s*([a-z]\w*)\s*\]/g,
    /os\.(?:Getenv|LookupEnv)\(\s*([A-Za-z_][\w.]*)\s*\)/g,
  ];
  for (const { path, text } of sources) {
    for (const re of literal) for (const m of text.matchAll(re)) read.set(m[1]!, path);
    for (const re of indirect) {
      for (const m of text.matchAll(re)) {
        const names = resolve(m[1]!, text);
        assert.ok(names, `${path}: cannot tell which variable ${m[0]} reads: name it with a constant or a list of names`);
        for (const n of names) read.set(n, path);
      }
    }
  }
  return read;
}

describe("environment variables", () => {
  const docs = files("docs", (n) => n.endsWith(".md"))
    .map((p) => readFileSync(p, "utf8"))
    .join("\n");
  const read = variablesRead();

  it("finds the variables the code reads", () => {
    for (const known of ["MANENT_LOG_LEVEL", "MANENT_HELM", "MANENT_SERVER", "MANENT_PLUGIN_LOG_LEVEL", "PLUGIN_CLIENT_CERT", "TZ"])
      assert.ok(read.has(known), `the scan missed ${known}`);
  });

  it("documents each of them in docs/", () => {
    const missing = [...read].filter(([name]) => !docs.includes(`\`${name}\``)).map(([name, path]) => `${name} (read in ${path})`);
    assert.deepEqual(missing, [], "documented nowhere in docs/ (write it as `NAME` in a page)");
  });
});
