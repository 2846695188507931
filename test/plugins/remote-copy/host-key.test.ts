import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fingerprintOf, verifyHostKey } from "../../../src/plugins/remote-copy/index.js";
import { generateKey, type KeyPair } from "../../support/sshd/index.js";

describe("remote-copy host key verification (known_hosts as OpenSSH writes it)", () => {
  let dir: string;
  let key: KeyPair;
  let other: KeyPair;
  const blob = (k: KeyPair): Buffer => Buffer.from(k.publicKey.split(" ")[1]!, "base64");
  const line = (hosts: string, k: KeyPair): string => `${hosts} ${k.publicKey.split(" ").slice(0, 2).join(" ")}`;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "manent-hostkey-"));
    key = await generateKey(join(dir, "a"));
    other = await generateKey(join(dir, "b"), { type: "rsa" });
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("computes the fingerprint ssh-keygen prints", () => {
    assert.equal(fingerprintOf(blob(key)), key.fingerprint);
    assert.equal(fingerprintOf(blob(other)), other.fingerprint);
  });

  it("matches plain, [host]:port, list, wildcard and negated patterns", () => {
    const kh = [
      line("web1.example.com,10.0.0.1", key),
      line("[10.0.0.2]:2222", key),
      line("*.prod.example.com,!db.prod.example.com", key),
    ].join("\n");
    const ok = (host: string, port: number): boolean => verifyHostKey({ knownHosts: kh }, host, port, blob(key)).ok;
    assert.ok(ok("web1.example.com", 22));
    assert.ok(ok("10.0.0.1", 22));
    assert.ok(!ok("10.0.0.1", 2222), "a non-22 port needs a [host]:port entry");
    assert.ok(ok("10.0.0.2", 2222));
    assert.ok(ok("api.prod.example.com", 22));
    assert.ok(!ok("db.prod.example.com", 22));
  });

  it("matches hashed entries written by ssh-keygen -H", async () => {
    const path = join(dir, "known_hosts");
    await writeFile(path, `${line("[127.0.0.9]:2200", key)}\n${line("build.example.com", key)}\n`);
    execFileSync("ssh-keygen", ["-H", "-f", path], { stdio: "pipe" });
    const kh = await readFile(path, "utf8");
    assert.ok(kh.startsWith("|1|"));
    assert.ok(verifyHostKey({ knownHosts: kh }, "127.0.0.9", 2200, blob(key)).ok);
    assert.ok(verifyHostKey({ knownHosts: kh }, "build.example.com", 22, blob(key)).ok);
    assert.ok(!verifyHostKey({ knownHosts: kh }, "other.example.com", 22, blob(key)).ok);
  });

  it("tells a changed key from an unknown host, and refuses revoked keys", () => {
    const changed = verifyHostKey({ knownHosts: line("h1", key) }, "h1", 22, blob(other));
    assert.ok(!changed.ok && /CHANGED/.test(changed.reason) && changed.reason.includes(other.fingerprint));
    const unknown = verifyHostKey({ knownHosts: line("h1", key) }, "h2", 22, blob(other));
    assert.ok(!unknown.ok && /unknown/.test(unknown.reason) && unknown.reason.includes("ssh-rsa"));
    const revoked = verifyHostKey({ knownHosts: `@revoked ${line("*", key)}\n${line("h1", key)}` }, "h1", 22, blob(key));
    assert.ok(!revoked.ok && /revoked/.test(revoked.reason));
  });

  it("accepts any of several pinned fingerprints", () => {
    const policy = { fingerprints: [other.fingerprint, key.fingerprint] };
    assert.ok(verifyHostKey(policy, "any", 22, blob(key)).ok);
    assert.ok(!verifyHostKey({ fingerprints: [other.fingerprint] }, "any", 22, blob(key)).ok);
  });
});
