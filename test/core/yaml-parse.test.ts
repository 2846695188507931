import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDocument } from "yaml";
import { z } from "zod";
import { parseYaml } from "../../src/core/config/index.js";
import { fastYaml } from "../../src/core/config/fast-yaml.js";

/**
 * manent reads YAML with js-yaml when it can (src/core/config/fast-yaml.ts) and with `yaml`
 * otherwise: a user must not tell which. Each case below is one where js-yaml, left to itself,
 * reads the text otherwise than `yaml` (YAML 1.2 core schema, unique keys, 100 aliases): the
 * expected value is what `yaml` reads (checked against `yaml` itself too), so each fails if its
 * alignment is removed.
 */
const read = (text: string): unknown => parseYaml(text, "f.yml", z.unknown());

/** What `yaml` alone reads, as parseYaml did before js-yaml: the value, or its first error's message. */
function yamlReads(text: string): unknown {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors[0]) return { error: doc.errors[0].message.split("\n")[0] };
  try {
    return doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function same(text: string, expected: unknown): void {
  assert.deepEqual(yamlReads(text), expected, "the expected value is yaml's reading");
  assert.deepEqual(read(text), expected);
}

function refused(text: string, message: RegExp): void {
  assert.match((yamlReads(text) as { error: string }).error, message, "yaml refuses it");
  assert.throws(() => read(text), message);
}

describe("YAML reading: js-yaml aligned on yaml", () => {
  it("takes the fast path for an ordinary document", () => {
    const text = "plugin: noop\ntargets:\n  - host: t0\n    labels:\n      zone: z0 # a comment\nparams: {}\nparallel: 1000\n";
    assert.ok(fastYaml(text), "js-yaml reads it");
    same(text, { plugin: "noop", targets: [{ host: "t0", labels: { zone: "z0" } }], params: {}, parallel: 1000 });
  });

  it("resolves plain scalars by the YAML 1.2 core schema: no YAML 1.1 booleans, timestamps, 0b or 1_000", () => {
    same("a: yes\nb: no\nc: on\nd: 2001-12-14\ne: 2001-12-14 21:59:43.10 -5\nf: 1_000\ng: 0b11\nh: +.5\n", {
      a: "yes",
      b: "no",
      c: "on",
      d: "2001-12-14",
      e: "2001-12-14 21:59:43.10 -5",
      f: "1_000",
      g: "0b11",
      h: 0.5,
    });
    same("a: 0o17\nb: 0x1F\nc: -0\nd: .inf\ne: -.Inf\nf: 1e3\ng: ~\nh: NULL\ni: TRUE\nj: 012\nk: 1.\n", {
      a: 15,
      b: 31,
      c: -0,
      d: Infinity,
      e: -Infinity,
      f: 1000,
      g: null,
      h: null,
      i: true,
      j: 12,
      k: 1,
    });
    assert.ok(Number.isNaN((read("a: .nan\n") as { a: number }).a));
  });

  it("reads a merge key `<<` as a plain key, as YAML 1.2 does", () => {
    same("a:\n  <<: {b: 1}\n  c: 2\n", { a: { "<<": { b: 1 }, c: 2 } });
  });

  it("reads tags as yaml does (!!binary, !!int, local tags)", () => {
    for (const text of ["a: !!binary aGk=\n", "a: !!int 0b11\n", "a: !!float 1\n", "a: !foo 1\n", "a: !!str 12\n", "a: !!int '12'\n"]) {
      assert.deepEqual(read(text), yamlReads(text), text);
    }
    assert.deepEqual(read("a: !!float 1\n"), { a: "1" });
  });

  it("refuses what yaml refuses: too many aliases, duplicate keys", () => {
    const aliases = `a: &a [x]\nb: [${Array(101).fill("*a").join(", ")}]\n`;
    refused(aliases, /Excessive alias count/);
    assert.throws(() => read(aliases), /^.*f\.yml: malformed YAML: .*alias/);
    same("a: &x {b: 1}\nc: *x\n", { a: { b: 1 }, c: { b: 1 } });
    refused("a: 1\nb: 2\na: 3\n", /Map keys must be unique/);
    assert.throws(() => read("a: 1\nb: 2\na: 3\n"), /^.*f\.yml:3:1: malformed YAML: Map keys must be unique$/);
    // Different scalars, one key: yaml keeps the last, js-yaml would refuse.
    same("1: a\n'1': b\n", { "1": "b" });
  });

  it("follows a %YAML 1.1 directive as yaml does", () => {
    same("%YAML 1.1\n---\na: yes\n", { a: true });
  });

  it("reads a null key as the empty key, and a collection key as yaml writes it", () => {
    same("null: a\n", { "": "a" });
    same("~: a\nb: 1\n", { "": "a", b: 1 });
    same("[a, b]: c\n", { "[ a, b ]": "c" });
    same("? [a, b]\n: c\n", { "[ a, b ]": "c" });
    same("k: {[a]}\n", { k: { "[ a ]": null } });
  });

  it("refuses what yaml refuses and js-yaml accepts", () => {
    refused(`${"k".repeat(1030)}: v\n`, /The : indicator must be at most 1024 chars after the start of an implicit block mapping key/);
    refused('a: "b"#c\n', /Comments must be separated from other tokens by white space characters/);
    refused("a: 1\rb: 2\n", /Nested mappings are not allowed in compact mappings/);
    refused("a: [\nb]\n", /Flow sequence in block collection must be sufficiently indented and end with a \]/);
    refused("a: {b: 1,\nc: 2}\n", /Flow map in block collection must be sufficiently indented and end with a \}/);
    refused("a:\n  b:\n#c\n    x\n  c: d\n", /Implicit keys need to be on a single line/);
    refused("a:\n  b:\n\t\n  c: d\n", /Tabs are not allowed as indentation/);
  });

  it("reads what js-yaml reads otherwise as yaml does", () => {
    same("---x: 1\n", { "---x": 1 });
    // Top-level block scalars (no manent file is one, but the reading stays yaml's).
    same("|1\n  a\n", " a\n");
    same("\n    |\n#c\n", "#c\n");
    same("a:\n  - -\n  - x\n", { a: [[null], "x"] });
    refused("k:\n  - # c\n- x\n", /A block sequence may not be used as an implicit map key/);
    refused("k: |\n    \n  x\n", /Block scalars with more-indented leading empty lines must use an explicit indentation indicator/);
    same("a:\n  b: |1\n  \n    \n  c: d\n", { a: { b: "", c: "d" } });
    same("a: [b,\n  c]\n", { a: ["b", "c"] });
  });

  it("reads nesting deeper than js-yaml's limit of 100 with yaml: refused by manent's limit of 32, as before", () => {
    const deep = `${"[".repeat(150)}${"]".repeat(150)}\n`;
    assert.equal(fastYaml(deep), undefined, "js-yaml refuses it");
    let expected: unknown = [];
    for (let i = 1; i < 150; i++) expected = [expected];
    assert.deepEqual(yamlReads(deep), expected);
    assert.throws(() => read(deep), /^.*f\.yml: (0\.){32}0: nested more than 32 levels$/);
  });
});
