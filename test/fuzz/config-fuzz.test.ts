import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { stringify } from "yaml";
import { descriptorSchema, envconfigSchema, manentConfigSchema, parseYaml, validate } from "../../src/core/config/index.js";
import { Code, ManentError } from "../../src/core/errors.js";

/** Strings an attacker would try: NUL, lone surrogates, controls, traversal, huge, and any code points. */
export const hostileString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ maxLength: 20 }),
  fc.constantFrom(
    "\u0000",
    "a\u0000b",
    "\ud800",
    "x\udfffy",
    "\u001b[31m",
    "../x",
    "/etc/passwd",
    "%00",
    "",
    " ",
    "*",
    "__proto__",
    "constructor",
    "1e309",
    "-1",
  ),
  fc.constantFrom("x".repeat(70_000), "é".repeat(5000)),
);

/** Any JSON-like value, hostile strings included (keys too). */
export const hostileValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    hostileString,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(hostileString, tie("value"), { maxKeys: 4 }),
  ),
})).value;

const schemas = { descriptor: descriptorSchema, envconfig: envconfigSchema, "manent.yml": manentConfigSchema } as const;

/** Either the value is accepted or the refusal is invalid_argument naming the file: never another error. */
function refusedCleanly(run: () => unknown, file: string): void {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof ManentError, `not a ManentError: ${String(err)}`);
    assert.equal(err.code, Code.InvalidArgument, err.message);
    assert.ok(err.message.startsWith(file), err.message);
    assert.ok(err.message.length < 2000, `a bounded message (${err.message.length} characters)`);
  }
}

/**
 * Property-based fuzzing of the config loaders (descriptor, envconfig, manent.yml): arbitrary YAML
 * text, arbitrary documents and mutations of valid ones are accepted or refused as bad input
 * naming the file; nothing throws anything else, hangs or blows up.
 */
describe("config loaders under fuzzing", () => {
  const valid = {
    descriptor: {
      apiVersion: "manent/v1",
      application: "hello",
      environment: "test",
      artifact: { type: "file", name: "hello", version: "1.0.0", source: "/a" },
    },
    envconfig: {
      plugin: "noop",
      targets: [{ host: "a", labels: { region: "eu" } }],
      params: { x: "1" },
      max_retries: 2,
      retry_interval: "1s",
    },
    "manent.yml": {
      workdir: "./work",
      listen: "127.0.0.1:8080",
      plugins: { noop: {} },
      artifacts: { allowed_urls: ["https://x.test/"], max_upload_size: "1MiB" },
    },
  };

  for (const [file, schema] of Object.entries(schemas)) {
    it(`${file}: arbitrary YAML text`, () => {
      fc.assert(
        fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 200 }), fc.string({ maxLength: 200 })), (text) =>
          refusedCleanly(() => parseYaml(text, file, schema), file),
        ),
        { numRuns: 1500 },
      );
    });

    it(`${file}: arbitrary documents and mutations of a valid one, as YAML and as parsed data`, () => {
      const base = valid[file as keyof typeof valid] as Record<string, unknown>;
      const mutated = fc.tuple(fc.constantFrom(...Object.keys(base), "unknown_key"), hostileValue).map(([k, v]) => ({ ...base, [k]: v }));
      const nested = fc.tuple(fc.constantFrom(...Object.keys(base)), hostileString, hostileValue).map(([k, inner, v]) => {
        const at = base[k];
        return { ...base, [k]: at && typeof at === "object" && !Array.isArray(at) ? { ...at, [inner]: v } : v };
      });
      fc.assert(
        fc.property(fc.oneof(hostileValue, mutated, nested), (doc) => {
          refusedCleanly(() => validate(doc, file, schema), file);
          let text: string | undefined;
          try {
            text = stringify(doc);
          } catch {
            return; // not representable as YAML text (the yaml library refuses it)
          }
          refusedCleanly(() => parseYaml(text, file, schema), file);
        }),
        { numRuns: 1500 },
      );
    });
  }

  it("refuses a YAML alias bomb quickly, naming the file", () => {
    const bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 10; i++)
      bomb.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(", ")}]`,
      );
    const started = process.hrtime.bigint();
    assert.throws(
      () => parseYaml(bomb.join("\n"), "envconfig/t/a/a/test.yml", envconfigSchema),
      /^.*envconfig\/t\/a\/a\/test\.yml: malformed YAML: .*alias/i,
    );
    assert.ok(process.hrtime.bigint() - started < 5_000_000_000n, "not expanded");
  });

  it("says what a wrong-typed field is, bounds an unknown-keys list, names bad characters", () => {
    assert.throws(
      () => validate({ ...valid.envconfig, rollback: "yes" }, "e.yml", envconfigSchema),
      /e\.yml: rollback: expected a mapping, got a string$/,
    );
    assert.throws(
      () => validate({ ...valid.envconfig, targets: { host: "a" } }, "e.yml", envconfigSchema),
      /e\.yml: targets: expected a list, got a mapping/,
    );
    const many = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}${"z".repeat(100)}`, 1]));
    try {
      validate({ ...valid.envconfig, ...many }, "e.yml", envconfigSchema);
      assert.fail("accepted");
    } catch (err) {
      assert.match((err as Error).message, /unknown fields "k0z+…", .* and 495 more$/);
      assert.ok((err as Error).message.length < 400);
    }
    assert.throws(
      () => validate({ ...valid.descriptor, artifact: { ...valid.descriptor.artifact, type: "a\u0000b" } }, "d.yml", descriptorSchema),
      /d\.yml: artifact\.type: contains a NUL character/,
    );
    assert.throws(
      () => validate({ ...valid.descriptor, environment: "\ud800" }, "d.yml", descriptorSchema),
      /d\.yml: environment: contains a lone UTF-16 surrogate/,
    );
  });
});
