import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DBOSJSON } from "@dbos-inc/dbos-sdk/internal/serialization";
import { checkpointSerializer } from "../../src/core/engine/checkpoint-serializer.js";

/**
 * Checkpoints are written as their JSON text when they are plain JSON (without DBOS's envelope and
 * its walk), anything else by DBOS's serializer; read back as DBOS's would read it.
 */
describe("checkpoint serializer", () => {
  const plain = [
    null,
    0,
    1.5,
    "text",
    true,
    [],
    {},
    { id: "d1", targets: Array.from({ length: 3 }, (_, i) => ({ host: `t${i}`, labels: { zone: "z" }, port: 22 })), nested: [[1, [2]]] },
    { "": "empty key", __dbos_serializer: "a field of the value itself", json: { meta: 1 } },
  ];

  it("writes plain JSON as its JSON text, and reads it back equal", () => {
    for (const v of plain) {
      const text = checkpointSerializer.stringify(v) as string;
      assert.equal(text, JSON.stringify(v));
      assert.deepEqual(checkpointSerializer.parse(text), v);
    }
  });

  it("writes a plain object with the envelope's own marker in the envelope, and reads it back equal", () => {
    for (const v of [
      { __dbos_serializer: "superjson" },
      { __dbos_serializer: "superjson", json: { a: 1 } },
      { __dbos_serializer: "superjson", json: 1, meta: { values: ["undefined"] } },
    ]) {
      const text = checkpointSerializer.stringify(v) as string;
      assert.equal(text, DBOSJSON.stringify(v));
      assert.deepEqual(checkpointSerializer.parse(text), v);
      assert.deepEqual(DBOSJSON.parse(text), v);
    }
  });

  it("leaves to DBOS's serializer what JSON would change, and reads it back as DBOS's would", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const values: unknown[] = [
      undefined,
      { at: new Date(0) },
      { missing: undefined, kept: 1 },
      [1, , 3],
      Number.NaN,
      { n: -0 },
      { inf: Number.POSITIVE_INFINITY },
      new Map([["k", 1]]),
      { set: new Set([1]) },
      { big: 10n },
      Object.assign(Object.create(null) as object, { a: 1 }),
      cyclic,
    ];
    let deep: unknown = "bottom";
    for (let i = 0; i < 500; i++) deep = { deep };
    values.push(deep);
    for (const v of values) {
      const text = checkpointSerializer.stringify(v) as string;
      assert.equal(text, DBOSJSON.stringify(v));
      assert.deepEqual(checkpointSerializer.parse(text), DBOSJSON.parse(text));
    }
    assert.ok(
      (checkpointSerializer.parse(checkpointSerializer.stringify({ at: new Date(0) }) as string) as { at: unknown }).at instanceof Date,
    );
  });

  it("reads what older versions wrote (plain JSON in DBOS's envelope, other values by DBOS's serializer), and null", () => {
    for (const v of plain) assert.deepEqual(checkpointSerializer.parse(DBOSJSON.stringify(v)), v);
    const older = DBOSJSON.stringify({ at: new Date(5), list: [1, "a"], u: undefined });
    assert.deepEqual(checkpointSerializer.parse(older), { at: new Date(5), list: [1, "a"], u: undefined });
    assert.deepEqual(checkpointSerializer.parse(DBOSJSON.stringify({ a: [1] })), { a: [1] });
    assert.equal(checkpointSerializer.parse(null), null);
  });
});
