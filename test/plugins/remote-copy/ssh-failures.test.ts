import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError, ResultError } from "../../../src/plugin.js";
import { establishedTo, generateKey, startSshHosts, type SshHosts } from "../../support/sshd/index.js";
import { currentOf, makeFile, makeTarball, RecordingLogger, request, type TestArtifact } from "./helpers.js";
import { sshAccess, sshPlugin, sshTargets } from "./ssh-fixture.js";

/** The error a deploy failed with (a ResultError carrying per-target results). */
async function failure(p: Promise<unknown>): Promise<ResultError> {
  const err = await p.then(
    () => assert.fail("the call should fail"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ResultError, `expected a ResultError, got ${String(err)}`);
  return err;
}

describe("remote-copy over SSH (real sshd): failures", () => {
  let hosts: SshHosts;
  let small: TestArtifact;
  let big: TestArtifact;

  before(async () => {
    hosts = await startSshHosts(2);
    small = await makeTarball(hosts.dir, "1.0.0");
    // Large enough that an upload is still running when the test reacts to its first progress line.
    big = await makeFile(hosts.dir, "shop.bin", "2.0.0", 48 * 1024 * 1024);
  });
  after(() => hosts.close());

  it("refuses an unknown host key, showing the fingerprint seen", async () => {
    const base = join(await hosts.ownedDir("hostkey"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const server = hosts.servers[0]!;
    const other = await generateKey(join(hosts.dir, "other_host_key"));
    const wrongLine = `[${server.host}]:${server.port} ${other.publicKey.split(" ").slice(0, 2).join(" ")}`;
    const d = await sshPlugin();
    const changed = await failure(
      d.deploy(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params,
          secrets: { ...secrets, "known-hosts": wrongLine },
        }),
      ),
    );
    assert.equal(changed.code, Code.Aborted);
    assert.match(changed.message, /CHANGED/);
    assert.ok(changed.message.includes(server.fingerprint), changed.message);

    const unknown = await failure(
      d.deploy(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params: { ...params, known_hosts_secret: "empty" },
          secrets: { ...secrets, empty: "" },
        }),
      ),
    );
    assert.equal(unknown.code, Code.Aborted);
    assert.match(unknown.message, /unknown/);
    assert.ok(unknown.message.includes(server.fingerprint), unknown.message);
    assert.equal(await currentOf(base.replace("{host}", server.host)), "");
  });

  it("refuses a user key the host does not authorise, permanently", async () => {
    const base = join(await hosts.ownedDir("userkey"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const stranger = await generateKey(join(hosts.dir, "stranger_key"));
    const d = await sshPlugin();
    const err = await failure(
      d.deploy(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params,
          secrets: { ...secrets, "ssh-key": stranger.privateKey },
        }),
      ),
    );
    assert.equal(err.code, Code.Unauthenticated);
    assert.ok(err.permanent);
    assert.ok(!err.message.includes("PRIVATE KEY"));
  });

  it("fails retryably when sshd dies during the upload, and a retry succeeds", async () => {
    const base = join(await hosts.ownedDir("killed"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const server = hosts.servers[1]!;
    const targets = sshTargets(hosts).slice(1);
    const logger = new RecordingLogger();
    let killed: Promise<void> | undefined;
    logger.onceOn("upload progress", () => {
      killed = server.kill();
    });
    const d = await sshPlugin();
    const err = await failure(d.deploy(request({ artifact: big, targets, params, secrets, logger })));
    assert.ok(killed, "the upload never reported progress");
    await killed;
    assert.equal(err.code, Code.Unavailable, err.message);
    assert.ok(!err.permanent);
    const hostBase = base.replace("{host}", server.host);
    assert.equal(await currentOf(hostBase), "");

    // Nothing listens now: a refused connection is retryable too.
    const refused = await failure(d.deploy(request({ artifact: big, targets, params, secrets })));
    assert.equal(refused.code, Code.Unavailable);
    assert.match(refused.message, /ECONNREFUSED/);

    await server.start();
    const r = await d.deploy(request({ artifact: big, targets, params, secrets }));
    assert.equal(r.targets[0]!.status, "deployed");
    assert.equal(r.targets[0]!.details?.bytes_sent, String(48 * 1024 * 1024));
    assert.equal(await currentOf(hostBase), "2.0.0");
  });

  it("refuses an unwritable base dir permanently, naming host and path", async () => {
    // Owned by root, mode 755: the deploy user can read but not write.
    const root = join(hosts.dir, "root-owned");
    await mkdir(root, { mode: 0o755 });
    const base = join(root, "app");
    const { params, secrets } = sshAccess(hosts, base);
    const server = hosts.servers[0]!;
    const d = await sshPlugin();
    const dry = await failure(
      d.dryRun(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params,
          secrets,
        }),
      ),
    );
    assert.equal(dry.code, Code.Aborted);
    assert.match(dry.message, new RegExp(`${server.host}: ${root} is not writable`));

    const err = await failure(
      d.deploy(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params,
          secrets,
        }),
      ),
    );
    assert.ok(err.permanent);
    assert.ok(err.message.includes(server.host) && err.message.includes(base), err.message);
    assert.match(err.message, /Permission denied/);
  });

  it("dry-runs a writable host as ready without changing it", async () => {
    const base = join(await hosts.ownedDir("dry"), "app");
    const { params, secrets } = sshAccess(hosts, base);
    const d = await sshPlugin();
    const r = await d.dryRun(
      request({
        artifact: small,
        targets: sshTargets(hosts, 1),
        params,
        secrets,
      }),
    );
    assert.equal(r.targets[0]!.status, "ready");
    assert.equal(r.targets[0]!.details?.previous_version, "");
    assert.equal(await currentOf(base), "");
  });

  it("refuses a full disk permanently, leaving current untouched", async (t) => {
    const mountPoint = await hosts.ownedDir("tmpfs");
    const { uid, gid } = hosts.user;
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=3m,mode=755,uid=${uid},gid=${gid}`, "tmpfs", mountPoint], { stdio: "pipe" });
    } catch (err) {
      t.skip(`cannot mount a tmpfs here: ${String(err)}`);
      return;
    }
    try {
      const base = join(mountPoint, "app");
      const { params, secrets } = sshAccess(hosts, base);
      const targets = sshTargets(hosts, 1);
      const d = await sshPlugin();
      await d.deploy(request({ artifact: small, targets, params, secrets }));

      // Bigger than the whole tmpfs: refused before the upload.
      const huge = await makeFile(hosts.dir, "huge.bin", "3.0.0", 4 * 1024 * 1024);
      const before = await failure(d.deploy(request({ artifact: huge, targets, params, secrets })));
      assert.ok(before.permanent);
      assert.match(before.message, /no space left on device/);
      assert.ok(before.message.includes(targets[0]!.host) && before.message.includes(base), before.message);

      // Fits as an upload, not once unpacked beside it: tar hits ENOSPC on the host.
      const unpacks = await makeTarball(hosts.dir, "4.0.0", 1800 * 1024);
      const during = await failure(d.deploy(request({ artifact: unpacks, targets, params, secrets })));
      assert.ok(during.permanent, during.message);
      assert.match(during.message, /no space left on device/);
      assert.ok(during.message.includes(`${base}/releases/4.0.0`), during.message);
      assert.equal(await currentOf(base), "1.0.0");
      // The failed install cleaned up after itself: only the first release is there.
      const { readdir } = await import("node:fs/promises");
      assert.deepEqual(await readdir(join(base, "releases")), ["1.0.0"]);
      assert.deepEqual(await readdir(join(base, ".incoming")), []);
    } finally {
      execFileSync("umount", [mountPoint]);
    }
  });

  it("closes its connections when cancelled", async () => {
    const base = join(await hosts.ownedDir("cancel"), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const targets = sshTargets(hosts);
    const ac = new AbortController();
    const logger = new RecordingLogger();
    let connectedAtAbort = 0;
    // Abort once both hosts are uploading, so both connections are open at that moment.
    const uploading = new Set<unknown>();
    logger.on("upload progress", (e) => {
      uploading.add(e.attrs?.host);
      if (uploading.size < targets.length || ac.signal.aborted) return;
      connectedAtAbort = targets.reduce((n, t) => n + establishedTo(t.host, t.port!), 0);
      ac.abort();
    });
    const d = await sshPlugin();
    const err = await failure(
      d.deploy(
        request({
          artifact: big,
          targets,
          params,
          secrets,
          logger,
          parallelism: 2,
          signal: ac.signal,
        }),
      ),
    );
    assert.equal(err.code, Code.Canceled, err.message);
    assert.equal(connectedAtAbort, 2, "both hosts should have been connected while uploading");
    for (const t of targets) {
      assert.equal(establishedTo(t.host, t.port!), 0, `a connection to ${t.host}:${t.port} is still open`);
      assert.equal(await currentOf(base.replace("{host}", t.host)), "");
    }
  });

  it("gives up on a host that accepts TCP but never speaks SSH, retryably", async () => {
    // A real listener that swallows the connection: only connect_timeout ends the wait.
    const accepted = new Set<Socket>();
    const silent = createServer((sock) => accepted.add(sock));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const port = (silent.address() as AddressInfo).port;
      const { params, secrets } = sshAccess(hosts, "/srv/app");
      const d = await sshPlugin();
      const err = await failure(
        d.deploy(
          request({
            artifact: small,
            targets: [{ host: "127.0.0.1", port, labels: {} }],
            params: { ...params, connect_timeout: "500ms" },
            secrets,
          }),
        ),
      );
      assert.equal(err.code, Code.Unavailable);
      assert.match(err.message, /no SSH session within 500 ms/);
      assert.equal(establishedTo("127.0.0.1", port), 0, "the plugin left its socket open");
    } finally {
      for (const sock of accepted) sock.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("names the failing target, not only the host, when two targets share one sshd", async () => {
    const base = join(await hosts.ownedDir("shared-host"), "{name}");
    const { params, secrets } = sshAccess(hosts, base);
    const server = hosts.servers[0]!;
    const targets = ["web-a", "web-b"].map((name) => ({ name, host: server.host, port: server.port, labels: {} }));
    // Only web-b's activation fails; its release dir is under its own base.
    const activate = 'case "$MANENT_RELEASE_DIR" in */web-b/*) echo "port taken" >&2; exit 3;; esac';
    const d = await sshPlugin();
    const err = await failure(d.deploy(request({ artifact: small, targets, params: { ...params, activate }, secrets })));
    const failed = err.result.targets.filter((t) => t.error);
    assert.equal(failed.length, 1, JSON.stringify(err.result.targets));
    const message = failed[0]!.error!;
    assert.ok(message.includes(`web-b (${server.host}): activate of release 1.0.0`), message);
    assert.ok(!message.includes("web-a"), message);
  });

  it("names a missing secret and its param", async () => {
    const { params } = sshAccess(hosts, "/srv/app");
    const d = await sshPlugin();
    await assert.rejects(
      d.deploy(
        request({
          artifact: small,
          targets: sshTargets(hosts, 1),
          params,
          secrets: {},
        }),
      ),
      (e: ManentError) => /secret "ssh-key" \(param ssh_key_secret\)/.test(e.message) && e.code === Code.NotFound,
    );
  });
});
