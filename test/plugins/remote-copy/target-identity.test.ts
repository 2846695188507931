import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError, type Target } from "../../../src/plugin.js";
import { remoteCopyFactory } from "../../../src/plugins/remote-copy/index.js";
import { makeTarball, RecordingLogger, request, type TestArtifact } from "./helpers.js";

const ssh = { transport: "ssh", user: "deploy", host_key_fingerprint: `SHA256:${"A".repeat(43)}` };

/**
 * Two targets that reach one place are one target: refused before anything is deployed, naming both,
 * whatever their names (the system resolver says what a name reaches), never merged or one skipped.
 */
describe("remote-copy: target identity is what is reached", () => {
  let dir: string;
  let artifact: TestArtifact;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "manent-identity-"));
    artifact = await makeTarball(dir, "1.0.0");
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const validate = async (targets: Target[], base = "/srv/shop") =>
    (await remoteCopyFactory({}, new RecordingLogger())).validate(request({ artifact, targets, params: { ...ssh, base } }));
  const refusal = async (targets: Target[], base?: string): Promise<ManentError> => {
    const err = await validate(targets, base).then(
      () => assert.fail("accepted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ManentError, String(err));
    assert.equal(err.code, Code.InvalidArgument, err.message);
    return err;
  };

  it("refuses 127.0.0.1 and localhost on one port, an address and its IPv4-mapped form, and two names of one host and port", async () => {
    const byName = await refusal([
      { host: "127.0.0.1", port: 2222, labels: {} },
      { host: "localhost", port: 2222, labels: {} },
    ]);
    assert.equal(
      byName.message,
      "remote-copy: param base: targets 127.0.0.1 and localhost reach the same place, /srv/shop on 127.0.0.1:2222 (127.0.0.1 and localhost are one address): " +
        "they would be one target, deployed once; remove one, or put {name} in base",
    );
    assert.equal(byName.details?.targets, "127.0.0.1,localhost");
    const mapped = await refusal([
      { name: "web-a", host: "127.0.0.5", labels: {} },
      { name: "web-b", host: "::ffff:127.0.0.5", labels: {} },
    ]);
    assert.match(mapped.message, /targets web-a and web-b reach the same place, \/srv\/shop on 127\.0\.0\.5:22/);
    const named = await refusal([
      { name: "web-a", host: "127.0.0.9", port: 2200, labels: {} },
      { name: "web-b", host: "127.0.0.9", port: 2200, labels: {} },
    ]);
    assert.match(named.message, /targets web-a and web-b reach the same place/);
  });

  it("accepts one machine reached twice when each target has its own place: another port, or its own base dir", async () => {
    await validate([
      { host: "127.0.0.1", port: 2222, labels: {} },
      { host: "localhost", port: 2223, labels: {} },
    ]);
    await validate(
      [
        { name: "web-a", host: "127.0.0.1", labels: {} },
        { name: "web-b", host: "localhost", labels: {} },
      ],
      "/srv/{name}",
    );
  });
});
