import assert from "node:assert/strict";
import { appendFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ResultError } from "../../../src/plugin.js";
import { generateKey, startSshHosts, type SshHosts } from "../../support/sshd/index.js";
import { currentOf, makeTarball, request, rollbackRequest, type TestArtifact } from "./helpers.js";
import { sshAccess, sshPlugin, sshTargets } from "./ssh-fixture.js";

describe("remote-copy over SSH (real sshd): deploy, activation, rollback", () => {
  let hosts: SshHosts;
  let v1: TestArtifact;
  let v2: TestArtifact;

  before(async () => {
    hosts = await startSshHosts(5);
    v1 = await makeTarball(hosts.dir, "1.0.0");
    v2 = await makeTarball(hosts.dir, "2.0.0");
  });
  after(() => hosts.close());

  it("deploys to two hosts and reads their current release", async () => {
    const root = await hosts.ownedDir("two-hosts");
    const base = join(root, "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const targets = sshTargets(hosts, 2);
    const d = await sshPlugin();
    const r = await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));
    for (const [i, t] of r.targets.entries()) {
      const hostBase = base.replace("{host}", targets[i]!.host);
      assert.equal(t.status, "deployed");
      assert.ok(Number(t.details?.bytes_sent) > 0);
      assert.equal(t.details?.release_path, `${hostBase}/releases/1.0.0`);
      assert.equal(await currentOf(hostBase), "1.0.0");
    }
    const rel = await d.currentRelease(request({ artifact: v1, targets, params, secrets }));
    assert.deepEqual(
      rel.map((x) => x.version),
      ["1.0.0", "1.0.0"],
    );
    const again = await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));
    assert.deepEqual(
      again.targets.map((t) => t.status),
      ["unchanged", "unchanged"],
    );
  });

  it("rolls every host back after a failed activation", async () => {
    const root = await hosts.ownedDir("activation");
    const base = join(root, "{host}");
    const { secrets, params: access } = sshAccess(hosts, base);
    // 2.0.0 cannot start; 1.0.0 can. Each activation is logged on the host.
    const params = {
      ...access,
      activate:
        'echo "$MANENT_VERSION" >> ../../activations.log; [ "$MANENT_VERSION" = 1.0.0 ] || { echo "missing config for $MANENT_VERSION" >&2; exit 7; }',
    };
    const targets = sshTargets(hosts, 2);
    const d = await sshPlugin();
    await d.deploy(request({ artifact: v1, targets, params, secrets, parallelism: 2 }));
    const checkpoint = await d.currentRelease(request({ artifact: v2, targets, params, secrets }));

    const err = await d.deploy(request({ artifact: v2, targets, params, secrets, parallelism: 2 })).then(
      () => assert.fail("deploy of 2.0.0 should fail"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.ok(err.permanent);
    assert.match(err.message, /exit code 7; stderr: missing config for 2\.0\.0/);
    assert.deepEqual(
      err.result.targets.map((t) => t.status),
      ["failed", "failed"],
    );

    const r = await d.rollback(rollbackRequest({ artifact: v2, targets, params, secrets, parallelism: 2 }, checkpoint));
    assert.deepEqual(
      r.targets.map((t) => [t.status, t.details?.previous_version]),
      [
        ["rolled_back", "2.0.0"],
        ["rolled_back", "2.0.0"],
      ],
    );
    const { readFile } = await import("node:fs/promises");
    for (const t of targets) {
      const hostBase = base.replace("{host}", t.host);
      assert.equal(await currentOf(hostBase), "1.0.0");
      assert.deepEqual((await readFile(join(hostBase, "activations.log"), "utf8")).trim().split("\n"), ["1.0.0", "2.0.0", "1.0.0"]);
    }
  });

  it("logs in with a passphrase-protected key", async () => {
    const key = await generateKey(join(hosts.dir, "protected_key"), {
      passphrase: "correct horse",
    });
    await appendFile(join(hosts.dir, "authorized_keys"), `${key.publicKey}\n`);
    const base = join(await hosts.ownedDir("passphrase"), "app");
    const { params, secrets } = sshAccess(hosts, base);
    const d = await sshPlugin();
    const withPassphrase = {
      ...params,
      ssh_key_secret: "protected",
      ssh_passphrase_secret: "protected-passphrase",
    };
    const r = await d.deploy(
      request({
        artifact: v1,
        targets: sshTargets(hosts, 1),
        params: withPassphrase,
        secrets: {
          ...secrets,
          protected: key.privateKey,
          "protected-passphrase": "correct horse",
        },
      }),
    );
    assert.equal(r.targets[0]!.status, "deployed");
    // Without the passphrase the key cannot be used: a configuration problem, not a network one.
    await assert.rejects(
      d.deploy(
        request({
          artifact: v2,
          targets: sshTargets(hosts, 1),
          params: { ...params, ssh_key_secret: "protected" },
          secrets: { ...secrets, protected: key.privateKey },
        }),
      ),
      (e: ResultError) => e.permanent && /unusable private key/.test(e.message) && !e.message.includes("correct horse"),
    );
  });

  it("deploys to five hosts in parallel", async () => {
    const root = await hosts.ownedDir("five");
    const base = join(root, "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const targets = sshTargets(hosts, 5);
    const d = await sshPlugin();
    const r = await d.deploy(request({ artifact: v2, targets, params, secrets, parallelism: 5 }));
    assert.deepEqual(
      r.targets.map((t) => t.status),
      Array(5).fill("deployed"),
    );
    assert.deepEqual(
      r.targets.map((t) => t.host),
      targets.map((t) => t.host),
    );
    for (const t of targets) assert.equal(await currentOf(base.replace("{host}", t.host)), "2.0.0");
  });

  it("accepts a pinned host key fingerprint and goes through a jump host", async () => {
    const root = await hosts.ownedDir("jump");
    const base = join(root, "{host}");
    const [jump, target] = hosts.servers;
    const { params: access, secrets } = sshAccess(hosts, base);
    const { known_hosts_secret: _unused, ...rest } = access;
    const params = {
      ...rest,
      jump_host: `${jump!.host}:${jump!.port}`,
      host_key_fingerprint: `${jump!.fingerprint},${target!.fingerprint}`,
    };
    const d = await sshPlugin();
    const r = await d.deploy(
      request({
        artifact: v1,
        targets: [{ host: target!.host, port: target!.port, labels: {} }],
        params,
        secrets,
      }),
    );
    assert.equal(r.targets[0]!.status, "deployed");
    assert.equal(await currentOf(base.replace("{host}", target!.host)), "1.0.0");
    // Without the jump host's fingerprint the bastion is refused like any unknown host.
    await assert.rejects(
      d.deploy(
        request({
          artifact: v2,
          targets: [{ host: target!.host, port: target!.port, labels: {} }],
          params: { ...params, host_key_fingerprint: target!.fingerprint },
          secrets,
        }),
      ),
      (e: ResultError) => e.code === Code.Aborted && e.message.includes(jump!.fingerprint),
    );
  });
});
