import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { findEnvconfig, gitProvider, type LoadedConfig } from "../../src/core/config/index.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { GitEnvconfigRepository } from "../../src/net/git-envconfig-source.js";
import { upstream } from "../support/git-upstream.js";
import { gitHttpsServer } from "../support/git-https-server.js";
import { generateKey, startSshHosts } from "../support/sshd/index.js";

function spec(repository: string, extra: Record<string, unknown> = {}) {
  return gitProvider.parse({
    name: "gitops",
    type: "git",
    git: { repository, path: "{tenant}/{application}/{artifact}/{environment}.yml", ...extra },
  }).git;
}

const key = { tenant: "t", application: "app", artifact: "app", environment: "prod" };
const file = "t/app/app/prod.yml";

function configWith(repo: GitEnvconfigRepository, s: ReturnType<typeof spec>): LoadedConfig {
  return {
    envconfig: { required: true, providers: [{ name: "gitops", type: "git", git: s }] },
    gitEnvconfig: new Map([["gitops", repo]]),
    file: "manent.yml",
  } as unknown as LoadedConfig;
}

function refused(field: RegExp | string) {
  return (err: unknown) => {
    assert.ok(err instanceof ManentError && err.code === Code.InvalidArgument, String(err));
    assert.match(String(err.details?.field), typeof field === "string" ? new RegExp(field) : field);
    return true;
  };
}

describe("git envconfig provider", () => {
  it("reads envconfig at the fetched commit, refreshes (joined), and records the origin", async () => {
    const up = await upstream();
    const c1 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: a}]\n" }, "one");
    const s = spec(`file://${up.bare}`);
    const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "workdir"));
    assert.deepEqual(await repo.start(), { provider: "gitops", before: undefined, after: c1 });
    repo.stop();
    const found = await findEnvconfig(configWith(repo, s), key);
    assert.deepEqual(found.envconfig.targets, [{ host: "a", labels: {} }]);
    assert.equal(found.origin?.commit, c1);
    assert.equal(found.origin?.provider, "git");

    const c2 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: b}]\n" }, "two");
    // Not read from a work tree: until refreshed, readers see c1.
    assert.equal((await findEnvconfig(configWith(repo, s), key)).origin?.commit, c1);
    const [r1, r2] = [repo.refresh(), repo.refresh()];
    assert.equal(r1, r2, "a refresh asked for while one runs joins it");
    assert.deepEqual(await r1, { provider: "gitops", before: c1, after: c2 });
    assert.deepEqual((await findEnvconfig(configWith(repo, s), key)).envconfig.targets, [{ host: "b", labels: {} }]);

    // A new process on the same workdir starts on the last good commit even when the repository is gone.
    const again = new GitEnvconfigRepository("gitops", spec(`file://${up.root}/missing.git`), join(up.root, "workdir"));
    Object.assign(again, { dir: repo.dir });
    const result = await again.start();
    again.stop();
    assert.equal(result.after, c2);
    assert.ok(result.error, "the failed fetch is reported");
  });

  it("reads a local path repository; refuses a key that is not a plain name", async () => {
    const up = await upstream();
    await up.commit({ [file]: "plugin: noop\n" }, "one");
    const s = spec(up.bare);
    const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "workdir"));
    await repo.start();
    repo.stop();
    assert.equal((await findEnvconfig(configWith(repo, s), key)).envconfig.plugin, "noop");
    await assert.rejects(findEnvconfig(configWith(repo, s), { ...key, environment: "../../x" }), refused("environment"));
  });

  it("refuses symlinks, oversized files and submodules, naming file and field", async () => {
    const up = await upstream();
    await up.commit({ "real/prod.yml": "plugin: noop\n", "t/app/big/prod.yml": "x".repeat(2000) }, "one");
    await mkdir(join(up.work, "t/app/app"), { recursive: true });
    await symlink("../../../real/prod.yml", join(up.work, file));
    await symlink("../../real", join(up.work, "t/app/dir"));
    await up.commit({}, "links");
    const s = spec(`file://${up.bare}`, { max_file_size: 1000 });
    const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "workdir"));
    await repo.start();
    repo.stop();
    await assert.rejects(repo.read(file), refused(file));
    await assert.rejects(repo.read("t/app/dir/prod.yml"), refused("t/app/dir"));
    await assert.rejects(repo.read("t/app/big/prod.yml"), refused("t/app/big/prod.yml"));

    await up.commit({ ".gitmodules": '[submodule "x"]\n\tpath = x\n\turl = /nowhere\n' }, "submodule");
    const before = repo.current;
    const result = await repo.refresh();
    assert.equal(result.after, before, "a refused commit keeps the last good one");
    assert.match(result.error ?? "", /submodules are refused/);
  });

  it("reports a force-pushed branch and keeps the last commit unless allow_force_push; a moved tag is refused", async () => {
    const up = await upstream();
    const c1 = await up.commit({ [file]: "plugin: one\n" }, "one");
    const s = spec(`file://${up.bare}`);
    const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "w1"));
    const follow = new GitEnvconfigRepository("gitops", spec(`file://${up.bare}`, { allow_force_push: true }), join(up.root, "w2"));
    await repo.start();
    await follow.start();
    repo.stop();
    follow.stop();
    up.git("checkout", "--quiet", "--orphan", "other");
    const c2 = await up.commit({ [file]: "plugin: two\n" }, "rewritten");
    const kept = await repo.refresh();
    assert.equal(kept.after, c1);
    assert.match(kept.error ?? "", /force-pushed/);
    assert.equal((await follow.refresh()).after, c2);

    up.git("tag", "v1", c1);
    up.git("push", "--quiet", up.bare, "refs/tags/v1");
    const tagged = new GitEnvconfigRepository("gitops", spec(`file://${up.bare}`, { ref: "v1" }), join(up.root, "w3"));
    assert.equal((await tagged.start()).after, c1);
    tagged.stop();
    up.git("push", "--quiet", "--force", up.bare, `${c2}:refs/tags/v1`);
    const moved = await tagged.refresh();
    assert.equal(moved.after, c1);
    assert.match(moved.error ?? "", /pinned/);
  });

  it("keeps credentials out of errors", async () => {
    const up = await upstream();
    const repo = new GitEnvconfigRepository(
      "gitops",
      spec(`ssh://deploy:hunter2@127.0.0.1:1/x.git`, { known_hosts: "127.0.0.1 ssh-ed25519 AAAA" }),
      join(up.root, "w"),
    );
    const result = await repo.start();
    repo.stop();
    assert.ok(result.error);
    assert.doesNotMatch(result.error, /hunter2/);
  });

  it("fetches over ssh:// through a real sshd with the pinned host key and a key from a secret reference; another host key is refused", async () => {
    const hosts = await startSshHosts(1);
    try {
      const up = await upstream();
      const c1 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: over-ssh}]\n" }, "one");
      // The bare repository where the deploy user reads it, as a git server's account would.
      const served = join(await hosts.ownedDir("repos"), "envconfig.git");
      execFileSync("git", ["clone", "--quiet", "--bare", up.bare, served]);
      execFileSync("chown", ["-R", `${hosts.user.uid}:${hosts.user.gid}`, served]);
      const keyFile = join(hosts.dir, "deploy-key");
      await writeFile(keyFile, hosts.userKey.privateKey, { mode: 0o600 });
      const server = hosts.servers[0]!;
      const url = `ssh://${hosts.user.name}@${server.host}:${server.port}${served}`;

      const s = spec(url, { known_hosts: hosts.knownHosts, ssh_key: `file:${keyFile}` });
      const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "workdir"));
      const started = await repo.start();
      repo.stop();
      assert.deepEqual(started, { provider: "gitops", before: undefined, after: c1 });
      const found = await findEnvconfig(configWith(repo, s), key);
      assert.deepEqual(found.envconfig.targets, [{ host: "over-ssh", labels: {} }]);
      // Recorded without its user info (a user name and, were one given, a password are never kept).
      assert.deepEqual([found.origin?.repository, found.origin?.commit], [`ssh://${server.host}:${server.port}${served}`, c1]);

      // The same server under a host key that is not the pinned one: nothing is fetched.
      const otherKey = await generateKey(join(hosts.dir, "other_host_key"));
      const [type, blob] = otherKey.publicKey.split(" ");
      const wrong = new GitEnvconfigRepository(
        "gitops",
        spec(url, { known_hosts: `[${server.host}]:${server.port} ${type} ${blob}`, ssh_key: `file:${keyFile}` }),
        join(up.root, "workdir-wrong"),
      );
      const refusedFetch = await wrong.start();
      wrong.stop();
      assert.equal(refusedFetch.after, undefined);
      assert.match(refusedFetch.error ?? "", /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/);
      assert.doesNotMatch(refusedFetch.error ?? "", /BEGIN OPENSSH PRIVATE KEY/);
    } finally {
      await hosts.close();
    }
  });

  it("fetches over https with a token from a secret reference, sent as a header and never shown, against a private CA", async () => {
    const up = await upstream();
    const c1 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: https-1}]\n" }, "one");
    const token = "ghp-secret-0123456789abcdef";
    const host = await gitHttpsServer(up.bare, token);
    try {
      const caFile = join(up.root, "git-ca.pem");
      await writeFile(caFile, host.caPem);
      process.env.MANENT_TEST_GIT_HTTPS_TOKEN = token;
      const s = spec(host.url, { token: "env:MANENT_TEST_GIT_HTTPS_TOKEN", ca_file: caFile });
      const logged: string[] = [];
      const repo = new GitEnvconfigRepository("gitops", s, join(up.root, "workdir"), (m) => logged.push(m));
      assert.deepEqual(await repo.start(), { provider: "gitops", before: undefined, after: c1 });
      repo.stop();
      const found = await findEnvconfig(configWith(repo, s), key);
      assert.deepEqual(found.envconfig.targets, [{ host: "https-1", labels: {} }]);
      assert.equal(found.origin?.repository, host.url);
      assert.ok(host.authorizations.length > 0 && host.authorizations.every((a) => a === `Bearer ${token}`), "the token went as a header");
      assert.ok(
        host.urls.every((u) => !u.includes(token)),
        "and never in a URL",
      );

      // A token the host refuses: the refresh fails, keeps c1, and no message shows the token.
      process.env.MANENT_TEST_GIT_HTTPS_TOKEN = "revoked-token-0123456789";
      await up.commit({ [file]: "plugin: noop\ntargets: [{host: https-2}]\n" }, "two");
      const failed = await repo.refresh();
      assert.equal(failed.after, c1);
      assert.match(failed.error ?? "", /401|Authentication failed|could not read/i);
      for (const text of [failed.error ?? "", ...logged]) {
        assert.ok(!text.includes("revoked-token-0123456789") && !text.includes(token), text);
      }

      // Without the private CA the host's certificate is not trusted.
      process.env.MANENT_TEST_GIT_HTTPS_TOKEN = token;
      const untrusted = new GitEnvconfigRepository(
        "gitops",
        spec(host.url, { token: "env:MANENT_TEST_GIT_HTTPS_TOKEN" }),
        join(up.root, "workdir-2"),
      );
      const refusedTls = await untrusted.start();
      untrusted.stop();
      assert.equal(refusedTls.after, undefined);
      assert.match(refusedTls.error ?? "", /certificate|SSL/i);
    } finally {
      delete process.env.MANENT_TEST_GIT_HTTPS_TOKEN;
      await host.close();
    }
  });

  it("stops a fetch that grows past max_checkout_size while it is received, keeps nothing of it, and fetches again after", async () => {
    const up = await upstream();
    const c1 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: small}]\n" }, "one");
    const token = "gitea-token-0123456789abcdef";
    const host = await gitHttpsServer(up.bare, token);
    try {
      const caFile = join(up.root, "git-ca.pem");
      await writeFile(caFile, host.caPem);
      process.env.MANENT_TEST_GIT_BIG_TOKEN = token;
      const s = spec(host.url, { token: "env:MANENT_TEST_GIT_BIG_TOKEN", ca_file: caFile, max_checkout_size: "1MiB" });
      const workdir = join(up.root, "workdir");
      const repo = new GitEnvconfigRepository("gitops", s, workdir);
      assert.equal((await repo.start()).after, c1);
      repo.stop();
      const objectsBytes = () => Number(execFileSync("du", ["-sb", join(repo.dir, "objects")], { encoding: "utf8" }).split("\t")[0]);
      const before = objectsBytes();

      // 3 MiB that do not compress, of which 2.75 MiB come before the host stalls: past the bound (1 MiB and the
      // pack slack of 1 MiB) mid-fetch.
      await writeFile(join(up.work, "blob.bin"), randomBytes(3 * 1024 * 1024));
      await up.commit({ [file]: "plugin: noop\ntargets: [{host: big}]\n" }, "big");
      const held = host.hold(2816 * 1024);
      const refresh = repo.refresh();
      const release = await held;
      const result = await refresh;
      release();
      assert.equal(result.after, c1, "the last good commit stays");
      assert.match(
        result.error ?? "",
        /the fetch passed 2097152 bytes while it was received \(git\.max_checkout_size is 1048576\): stopped/,
      );
      assert.ok(objectsBytes() - before < 256 * 1024, `the half-received pack was removed (${objectsBytes() - before} bytes more)`);

      // Back under the bound, the next fetch is not stopped by what the killed one left.
      execFileSync("git", ["rm", "--quiet", "blob.bin"], { cwd: up.work });
      const c3 = await up.commit({ [file]: "plugin: noop\ntargets: [{host: fixed}]\n" }, "small again");
      const again = await repo.refresh();
      assert.deepEqual([again.after, again.error], [c3, undefined]);
    } finally {
      delete process.env.MANENT_TEST_GIT_BIG_TOKEN;
      await host.close();
    }
  });

  it("refuses to start on a token, key or CA file the configuration names but that cannot be read: a configuration error, not a failed fetch", async () => {
    const up = await upstream();
    await up.commit({ [file]: "plugin: noop\n" }, "one");
    const workdir = join(up.root, "workdir");
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ token: "env:MANENT_TEST_GIT_UNSET_TOKEN" }, /envconfig provider gitops: git\.token.*MANENT_TEST_GIT_UNSET_TOKEN is not set/],
      [{ ca_file: join(up.root, "no-such-ca.pem") }, /envconfig provider gitops: git\.ca_file: cannot read .*no-such-ca\.pem: ENOENT/],
    ];
    for (const [extra, message] of cases) {
      const repo = new GitEnvconfigRepository("gitops", spec("https://127.0.0.1:1/envconfig.git", extra), workdir);
      await assert.rejects(repo.start(), (err: unknown) => {
        assert.ok(err instanceof ManentError && err.permanent, String(err));
        assert.match(err.message, message);
        return true;
      });
      repo.stop();
    }
  });
});
