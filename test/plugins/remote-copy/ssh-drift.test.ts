import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { DriftInspector } from "../../../src/plugin.js";
import { startSshHosts, type SshHosts } from "../../support/sshd/index.js";
import { currentOf, makeTarball, request, type TestArtifact } from "./helpers.js";
import { sshAccess, sshPlugin, sshTargets, type FullDeployer } from "./ssh-fixture.js";

const sha = (text: string): string => createHash("sha256").update(text).digest("hex");

describe("remote-copy drift over SSH (real sshd): live release and files against the install-time checksums", () => {
  let hosts: SshHosts;
  let v1: TestArtifact;
  let v2: TestArtifact;
  let d: FullDeployer & DriftInspector;

  before(async () => {
    hosts = await startSshHosts(2);
    v1 = await makeTarball(hosts.dir, "1.0.0");
    v2 = await makeTarball(hosts.dir, "2.0.0");
    d = (await sshPlugin()) as FullDeployer & DriftInspector;
  });
  after(() => hosts.close());

  it("reports a changed, a deleted and an added file by target and path, and a deploy of the same release heals them", async () => {
    const base = join(await hosts.ownedDir("files"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const targets = sshTargets(hosts, 2);
    const [a, b] = targets.map((t) => base.replace("{host}", t.host));
    await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));

    const clean = await d.drift(request({ artifact: v1, targets, params, secrets }));
    assert.deepEqual(
      clean.map((t) => [t.host, t.status, t.version, t.changes]),
      targets.map((t) => [t.host, "in_sync", "1.0.0", []]),
    );

    // Someone edits a file on the first host, and deletes one and adds one on the second.
    await writeFile(join(a!, "current", "app.txt"), "patched by hand");
    await rm(join(b!, "current", "bin", "run.sh"));
    await writeFile(join(b!, "current", "debug.log"), "x");

    const drifted = await d.drift(request({ artifact: v1, targets, params, secrets }));
    assert.equal(drifted[0]!.host, targets[0]!.host);
    assert.equal(drifted[0]!.status, "drifted");
    assert.deepEqual(drifted[0]!.changes, [{ object: "app.txt", field: "sha256", expected: sha("1.0.0"), live: sha("patched by hand") }]);
    assert.equal(drifted[1]!.status, "drifted");
    assert.deepEqual(drifted[1]!.changes, [
      { object: "bin/run.sh", field: "", expected: "present", live: "" },
      { object: "debug.log", field: "", expected: "", live: "present" },
    ]);

    // The heal: the same release deployed again is installed again, since its files changed.
    const healed = await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));
    assert.deepEqual(
      healed.targets.map((t) => t.status),
      ["deployed", "deployed"],
    );
    assert.equal(await readFile(join(a!, "current", "app.txt"), "utf8"), "1.0.0");
    const after = await d.drift(request({ artifact: v1, targets, params, secrets }));
    assert.deepEqual(
      after.map((t) => t.status),
      ["in_sync", "in_sync"],
    );
    // Intact and current: a deploy changes nothing.
    const again = await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));
    assert.deepEqual(
      again.targets.map((t) => t.status),
      ["unchanged", "unchanged"],
    );
  });

  it("reports another release in service, and 'unknown' for a release installed without checksums", async () => {
    const base = join(await hosts.ownedDir("releases"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const targets = sshTargets(hosts, 1);
    const hostBase = base.replace("{host}", targets[0]!.host);
    await d.deploy(request({ artifact: v2, targets, params, secrets }));
    assert.equal(await currentOf(hostBase), "2.0.0");

    const other = await d.drift(request({ artifact: v1, targets, params, secrets }));
    assert.equal(other[0]!.status, "drifted");
    assert.equal(other[0]!.version, "2.0.0");
    assert.deepEqual(other[0]!.changes, [{ object: "current", field: "version", expected: "1.0.0", live: "2.0.0" }]);

    // A release installed by an older remote-copy has no checksums: its files cannot be compared.
    await rm(join(hostBase, ".checksums", "2.0.0"));
    const unknown = await d.drift(request({ artifact: v2, targets, params, secrets }));
    assert.equal(unknown[0]!.status, "unknown");
    assert.match(unknown[0]!.details?.reason ?? "", /no checksums recorded for release 2\.0\.0/);
  });
});
