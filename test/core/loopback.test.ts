import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isLoopbackHost, isLoopbackHttpUrl } from "../../src/core/net/loopback.js";

/** The one definition of loopback the open API, TLS, cookies and OpenID URLs all use. */
describe("loopback", () => {
  it("counts all of 127.0.0.0/8, ::1, IPv4-mapped ::ffff:127.x and localhost", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "::ffff:127.0.0.3", "[::ffff:127.0.0.3]", "localhost"])
      assert.equal(isLoopbackHost(host), true, host);
  });

  it("counts nothing else", () => {
    for (const host of [
      "128.0.0.1",
      "126.255.255.255",
      "::2",
      "::ffff:128.0.0.1",
      "0.0.0.0",
      "::",
      "10.0.0.1",
      "",
      "127.0.0.1.example.com",
      "localhost.example.com",
    ])
      assert.equal(isLoopbackHost(host), false, host);
  });

  it("allows plain http only on a loopback host", () => {
    assert.equal(isLoopbackHttpUrl("http://127.0.0.2:8080/"), true);
    assert.equal(isLoopbackHttpUrl("http://[::1]:8080/"), true);
    assert.equal(isLoopbackHttpUrl("https://127.0.0.1/"), false);
    assert.equal(isLoopbackHttpUrl("http://128.0.0.1/"), false);
    assert.equal(isLoopbackHttpUrl("not a url"), false);
  });
});
