import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { connectionShares } from "../../src/core/config/index.js";
import { loadManentYml } from "../support/load-manent-yml.js";

/** manent.yml's dbos.connections: how many connections a server opens to Postgres, and how its two pools share them. */
describe("dbos.connections", () => {
  const load = loadManentYml;

  it("is 30 by default, with or without a dbos section: 20 for the records and API, 10 for the workflow engine", async () => {
    for (const settings of [{}, { dbos: null }, { dbos: { executor_id: "worker-1" } }]) {
      const config = await load(settings);
      assert.equal(config.dbos.connections, 30);
    }
    assert.deepEqual(connectionShares(30), { records: 20, engine: 10 });
  });

  it("gives the workflow engine a third, never fewer than five, and the records the rest", () => {
    assert.deepEqual(connectionShares(12), { records: 7, engine: 5 });
    assert.deepEqual(connectionShares(10), { records: 5, engine: 5 });
    assert.deepEqual(connectionShares(100), { records: 67, engine: 33 });
    for (let n = 10; n <= 1000; n++) {
      const { records, engine } = connectionShares(n);
      assert.equal(records + engine, n, `${n} connections are all given`);
      assert.ok(engine >= 5 && records >= 5, `${n}: ${engine} and ${records}`);
    }
  });

  it("refuses fewer than 10, more than 1000 and fractions, naming the field", async () => {
    for (const connections of [9, 0, -1, 1001, 12.5, "twelve"]) {
      await assert.rejects(load({ dbos: { connections } }), (err: Error) => {
        assert.ok(err.message.includes("manent.yml: dbos.connections"), `${err.message} names dbos.connections`);
        return true;
      });
    }
  });
});
