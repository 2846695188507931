import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ManentError, isPermanent, permanent } from "../../src/core/errors.js";

describe("ManentError", () => {
  it("keeps code, message and details through JSON, as step records and API responses carry it", () => {
    const e = new ManentError(Code.InvalidArgument, "hello.yml: artifact.version: is required", { details: { file: "hello.yml" } });
    const back = ManentError.fromJSON(JSON.parse(JSON.stringify(e.toJSON())));
    assert.equal(back.code, Code.InvalidArgument);
    assert.equal(back.message, e.message);
    assert.deepEqual(back.details, { file: "hello.yml" });
  });

  it("recognises a serialized ManentError (as DBOS stores step errors) by its name and code", () => {
    const plain = { name: "ManentError", message: "rollout stuck", code: Code.Aborted, details: {} };
    const e = ManentError.from(plain);
    assert.equal(e.code, Code.Aborted);
    assert.equal(e.permanent, true);
  });

  it("marks permanent errors and leaves others retryable", () => {
    assert.equal(isPermanent(permanent(new Error("max_destroy exceeded"))), true);
    assert.equal(permanent(new Error("x")).code, Code.Aborted);
    assert.equal(isPermanent(new Error("connection reset")), false);
    assert.equal(isPermanent(new ManentError(Code.Unavailable, "down")), false);
    assert.equal(isPermanent(new ManentError(Code.InvalidArgument, "bad")), true);
  });

  it("turns an AbortError into canceled", () => {
    const err = new DOMException("aborted", "AbortError");
    assert.equal(ManentError.from(err).code, Code.Canceled);
  });
});
