import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { AddressRules } from "../../src/core/artifacts/address-rules.js";
import { ArtifactCache } from "../../src/core/artifacts/artifact-cache.js";
import { ArtifactPolicy } from "../../src/core/artifacts/artifact-policy.js";
import type { Resolver } from "../../src/core/artifacts/network.js";
import { artifactsConfigSchema, type ArtifactsConfig } from "../../src/core/config/index.js";
import { checkArtifactSource, fetchArtifact } from "../../src/core/engine/artifact-fetch.js";
import { sendCallback, type CallbackPayload } from "../../src/core/engine/callbacks.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { nodeNetwork } from "../../src/net/node-network.js";
import { tempDir } from "../support/temp-dir.js";

/** The real network; a test that decides what names resolve to replaces its lookup. */
const network = nodeNetwork();

/**
 * The artifact rules without a manent-server: which addresses, URLs and server paths a deploy may
 * name. Address rules are checked by the classifier and by an injected resolver, never by
 * connecting: the only traffic is to HTTP servers this test starts on loopback.
 */
describe("artifact rules", () => {
  describe("address rules", () => {
    const rules = new AddressRules([]);
    const refused = [
      ["127.0.0.1", /loopback/],
      ["127.8.9.10", /loopback/],
      ["::1", /loopback/],
      ["169.254.169.254", /link-local/], // a cloud's metadata service
      ["fe80::1", /link-local/],
      ["10.0.0.1", /private/],
      ["172.16.5.4", /private/],
      ["192.168.1.1", /private/],
      ["100.64.0.1", /carrier-grade NAT/],
      ["fd00::1", /unique-local/],
      ["0.0.0.0", /unspecified/],
      ["::", /unspecified/],
      ["224.0.0.1", /multicast/],
      ["255.255.255.255", /broadcast/],
      ["::ffff:127.0.0.1", /loopback/], // IPv4-mapped: judged as the IPv4 address it carries
      ["::ffff:7f00:1", /loopback/],
      ["::ffff:169.254.169.254", /link-local/],
      ["::ffff:10.1.2.3", /private/],
      ["64:ff9b::a9fe:a9fe", /NAT64/], // 169.254.169.254 through NAT64
      ["2002:a9fe:a9fe::1", /6to4/],
      ["2001:db8::1", /reserved/],
    ] as const;
    for (const [address, why] of refused) {
      it(`refuses ${address}`, () => assert.match(rules.refusal(address) ?? "allowed", why));
    }
    it("allows public unicast addresses", () => {
      for (const a of ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"]) assert.equal(rules.refusal(a), undefined, a);
    });
    it("allows what allowed_networks holds, and nothing next to it", () => {
      const some = new AddressRules(["10.1.0.0/16", "127.0.0.1", "fd00:1::/32"]);
      assert.equal(some.refusal("10.1.200.3"), undefined);
      assert.equal(some.refusal("::ffff:10.1.0.9"), undefined);
      assert.equal(some.refusal("127.0.0.1"), undefined);
      assert.equal(some.refusal("fd00:1::5"), undefined);
      assert.match(some.refusal("10.2.0.1")!, /private/);
      assert.match(some.refusal("127.0.0.2")!, /loopback/);
      assert.match(some.refusal("169.254.169.254")!, /link-local/);
    });
    it("refuses what is not an address", () => assert.equal(rules.refusal("localhost"), "not an IP address"));
  });

  describe("names and URLs (an injected resolver: nothing is connected to)", () => {
    const names: Record<string, string[]> = {
      "metadata.test": ["169.254.169.254"],
      "intranet.test": ["10.0.0.7"],
      "mixed.test": ["93.184.216.34", "192.168.0.1"],
      "mapped.test": ["::ffff:127.0.0.1"],
      "public.test": ["93.184.216.34"],
    };
    const lookups: string[] = [];
    const resolver: Resolver = async (host) => {
      lookups.push(host);
      const found = names[host];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
    const policy = (artifacts: Partial<ArtifactsConfig>) =>
      new ArtifactPolicy({
        artifacts: artifactsConfigSchema.parse(artifacts),
        baseDir: "/",
        workdirPath: "/nonexistent-workdir",
        lookup: resolver,
      });
    const all = policy({ allowed_urls: Object.keys(names).map((n) => `https://${n}/`) });
    const refusal = async (p: ArtifactPolicy, url: string) => {
      try {
        await p.checkUrl(new URL(url));
      } catch (err) {
        assert.ok(err instanceof ManentError);
        assert.equal(err.code, Code.InvalidArgument);
        return err.message;
      }
      return "allowed";
    };

    it("refuses a name that resolves to a link-local, private or mapped loopback address", async () => {
      assert.match(
        await refusal(all, "https://metadata.test/a.tgz"),
        /host metadata\.test is a link-local address \(169\.254\.169\.254\).*allowed_networks/,
      );
      assert.match(await refusal(all, "https://intranet.test/a.tgz"), /private address/);
      assert.match(
        await refusal(all, "https://mixed.test/a.tgz"),
        /private address \(192\.168\.0\.1\)/,
        "one bad address refuses the name",
      );
      assert.match(await refusal(all, "https://mapped.test/a.tgz"), /loopback/);
      assert.equal(await refusal(all, "https://public.test/a.tgz"), "allowed");
    });
    it("refuses IP literals in every form without resolving them", async () => {
      const literals = policy({
        allowed_urls: ["http://169.254.169.254/", "http://[::ffff:a9fe:a9fe]/", "http://0x7f.1/", "http://2130706433/"],
      });
      lookups.length = 0;
      assert.match(await refusal(literals, "http://169.254.169.254/latest/meta-data/"), /link-local/);
      assert.match(await refusal(literals, "http://[::ffff:a9fe:a9fe]/x"), /link-local/);
      // The URL parser turns hex and decimal IPv4 forms into 127.0.0.1, which the allow list and the rules then see.
      assert.match(await refusal(literals, "http://0x7f.1/"), /host 127\.0\.0\.1 is a loopback address/);
      assert.match(await refusal(literals, "http://2130706433/"), /host 127\.0\.0\.1 is a loopback address/);
      assert.deepEqual(lookups, []);
    });
    it("allows only URLs under an allowed prefix, at a path boundary, same scheme, host and port", async () => {
      const some = policy({ allowed_urls: ["https://public.test/releases/"] });
      assert.equal(await refusal(some, "https://public.test/releases/hello-1.0.0.tgz"), "allowed");
      assert.match(await refusal(some, "https://public.test/releases-evil/x"), /not under an allowed URL/);
      assert.match(await refusal(some, "https://public.test/releases/../admin"), /not under an allowed URL/);
      assert.match(await refusal(some, "http://public.test/releases/x"), /not under an allowed URL/);
      assert.match(await refusal(some, "https://public.test:8443/releases/x"), /not under an allowed URL/);
      assert.match(await refusal(some, "https://public.test.evil.test/releases/x"), /not under an allowed URL/);
      assert.match(await refusal(policy({}), "https://public.test/x"), /fetches no URL.*uploads it/);
      assert.match(await refusal(some, "https://nowhere.test/releases/x"), /not under an allowed URL/);
      const any = policy({ allowed_urls: ["https://nowhere.test/"] });
      assert.match(await refusal(any, "https://nowhere.test/x"), /does not resolve/);
    });
  });

  describe("fetching (loopback servers this test starts)", () => {
    let dir: string;
    let allowed: Server;
    let other: Server;
    let otherHits = 0;
    let resolutions = 0;
    const allowedHits: IncomingMessage[] = [];
    const body = Buffer.from("artifact bytes\n");
    const sha = createHash("sha256").update(body).digest("hex");
    let allowedPort = 0;
    let otherPort = 0;

    before(async () => {
      dir = await tempDir("manent-rules-");
      allowed = createServer((req, res) => {
        allowedHits.push(req);
        if (req.url === "/a.txt") return void res.end(body);
        if (req.url === "/to-other") return void res.writeHead(302, { location: `http://127.0.0.2:${otherPort}/a.txt` }).end();
        if (req.url === "/to-unlisted")
          return void res.writeHead(301, { location: `http://127.0.0.1:${allowedPort}/../secret/a.txt` }).end();
        if (req.url === "/loop") return void res.writeHead(307, { location: "/loop" }).end();
        if (req.url === "/down") return void res.writeHead(503).end();
        res.writeHead(404).end();
      });
      other = createServer((_req, res) => {
        otherHits++;
        res.end("must not be read");
      });
      await new Promise<void>((r) => allowed.listen(0, "127.0.0.1", r));
      await new Promise<void>((r) => other.listen(0, "127.0.0.2", r));
      allowedPort = (allowed.address() as AddressInfo).port;
      otherPort = (other.address() as AddressInfo).port;
    });
    after(() => {
      allowed.close();
      other.close();
    });

    // A name that resolves to the allowed loopback address once and to another address after:
    // the connection must go to the address checked, whatever the name resolves to later.
    const rebinding: Resolver = async (host) => {
      assert.equal(host, "artifacts.test");
      return [{ address: resolutions++ === 0 ? "127.0.0.1" : "127.0.0.2", family: 4 }];
    };
    const ctx = (urls: string[], resolver?: Resolver) => ({
      config: {
        artifacts: artifactsConfigSchema.parse({ allowed_urls: urls, allowed_networks: ["127.0.0.1/32"] }),
        baseDir: dir,
        workdirPath: join(dir, "work"),
      },
      tenant: "team-a",
      network: resolver ? { ...network, lookup: resolver } : network,
    });
    const artifact = (source: string, sha256?: string) => ({
      type: "file",
      name: "app",
      version: "1.0.0",
      source,
      ...(sha256 && { sha256 }),
    });
    const failure = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof ManentError, `expected a refusal, got ${String(err)}`);
      return err;
    };

    it("fetches an allowed URL into the tenant's private cache (0700 directories, owner-only file)", async () => {
      const got = await fetchArtifact(
        artifact(`http://127.0.0.1:${allowedPort}/a.txt`, sha),
        ctx([`http://127.0.0.1:${allowedPort}/`]),
        AbortSignal.timeout(10_000),
      );
      assert.equal(got.path, join(dir, "work", "artifacts", "team-a", sha, "a.txt"));
      assert.deepEqual(await readFile(got.path!), body);
      assert.equal((await stat(got.path!)).mode & 0o077, 0, "no access for group or others");
      for (const d of [join(dir, "work", "artifacts", "team-a"), join(dir, "work", "artifacts", "team-a", sha)]) {
        assert.equal((await stat(d)).mode & 0o777, 0o700, d);
      }
    });

    it("connects to the address it checked, even when the name resolves elsewhere later (DNS rebinding)", async () => {
      allowedHits.length = 0;
      resolutions = 0;
      const got = await fetchArtifact(
        artifact(`http://artifacts.test:${allowedPort}/a.txt`),
        ctx([`http://artifacts.test:${allowedPort}/`], rebinding),
        AbortSignal.timeout(10_000),
      );
      assert.deepEqual(await readFile(got.path!), body);
      assert.equal(resolutions, 1, "resolved once, when checked");
      assert.equal(allowedHits.length, 1);
      assert.equal(allowedHits[0]!.headers.host, `artifacts.test:${allowedPort}`);
      assert.equal(otherHits, 0);
    });

    it("refuses a redirect to a loopback address it does not allow, without connecting to it", async () => {
      const urls = [`http://127.0.0.1:${allowedPort}/`, `http://127.0.0.2:${otherPort}/`];
      const err = await failure(
        fetchArtifact(artifact(`http://127.0.0.1:${allowedPort}/to-other`), ctx(urls), AbortSignal.timeout(10_000)),
      );
      assert.equal(err.code, Code.InvalidArgument);
      assert.match(err.message, /host 127\.0\.0\.2 is a loopback address/);
      assert.equal(otherHits, 0);
    });

    it("refuses a redirect out of the allowed URLs, a redirect loop, and reports a 5xx as retryable", async () => {
      const urls = [
        `http://127.0.0.1:${allowedPort}/to-unlisted`,
        `http://127.0.0.1:${allowedPort}/loop`,
        `http://127.0.0.1:${allowedPort}/down`,
      ];
      const unlisted = await failure(
        fetchArtifact(artifact(`http://127.0.0.1:${allowedPort}/to-unlisted`), ctx(urls), AbortSignal.timeout(10_000)),
      );
      assert.match(unlisted.message, /\/secret\/a\.txt is not under an allowed URL/);
      const loop = await failure(fetchArtifact(artifact(`http://127.0.0.1:${allowedPort}/loop`), ctx(urls), AbortSignal.timeout(10_000)));
      assert.match(loop.message, /more than 5 redirects/);
      const down = await failure(fetchArtifact(artifact(`http://127.0.0.1:${allowedPort}/down`), ctx(urls), AbortSignal.timeout(10_000)));
      assert.equal(down.code, Code.Unavailable);
    });

    it("refuses a loopback URL that allowed_networks does not hold, before connecting", async () => {
      const before = otherHits;
      const err = await failure(
        checkArtifactSource(artifact(`http://127.0.0.2:${otherPort}/a.txt`), ctx([`http://127.0.0.2:${otherPort}/`])),
      );
      assert.match(err.message, /loopback/);
      assert.equal(otherHits, before);
    });

    it("reads server paths only under allowed_paths, links resolved, never the workdir, and tells no hash", async () => {
      const root = join(dir, "allowed");
      await mkdir(join(root, "sub"), { recursive: true });
      await writeFile(join(root, "sub", "ok.txt"), "ok\n");
      await writeFile(join(dir, "outside.txt"), "secret\n");
      await symlink(join(dir, "outside.txt"), join(root, "link-out.txt"));
      await symlink(dir, join(root, "dir-out"));
      await mkdir(join(dir, "work"), { recursive: true });
      await writeFile(join(dir, "work", "state.txt"), "server state\n");
      const paths = (allowed_paths: string[]) => ({
        config: { artifacts: artifactsConfigSchema.parse({ allowed_paths }), baseDir: dir, workdirPath: join(dir, "work") },
        tenant: "team-a",
        network,
      });
      const inRoot = paths(["allowed", "."]);
      await checkArtifactSource(artifact(join(root, "sub", "ok.txt")), paths(["allowed"]));
      await checkArtifactSource(artifact(`file://${join(root, "sub", "ok.txt")}`), paths(["allowed"]));
      for (const [source, why] of [
        ["/etc/passwd", /is not under a directory the server allows/],
        ["/proc/self/environ", /is not under a directory the server allows/],
        [join(dir, "outside.txt"), /is not under a directory the server allows/],
        [join(root, "link-out.txt"), /is not under a directory the server allows/],
        [join(root, "dir-out", "outside.txt"), /is not under a directory the server allows/],
        [join(root, "sub", "..", "..", "outside.txt"), /is not under a directory the server allows/],
        [join(root, "missing.txt"), /does not exist/],
        [join(root, "sub"), /not a regular file/],
      ] as const) {
        const err = await failure(checkArtifactSource(artifact(source), paths(["allowed"])));
        assert.equal(err.code, Code.InvalidArgument, source);
        assert.match(err.message, why, source);
      }
      const work = await failure(checkArtifactSource(artifact(join(dir, "work", "state.txt")), inRoot));
      assert.match(work.message, /is not under a directory the server allows/);
      const none = await failure(checkArtifactSource(artifact(join(root, "sub", "ok.txt")), paths([])));
      assert.match(none.message, /server-side paths are not allowed.*uploads it/);
      const relative = await failure(checkArtifactSource(artifact("dist/app.tgz"), paths(["allowed"])));
      assert.match(relative.message, /manent CLI, which uploads it/);

      // A wrong sha256 is refused without the hash of what was read.
      const wrong = "0".repeat(64);
      const mismatch = await failure(
        fetchArtifact(artifact(join(root, "sub", "ok.txt"), wrong), paths(["allowed"]), AbortSignal.timeout(10_000)),
      );
      assert.match(mismatch.message, /does not match artifact\.sha256/);
      assert.doesNotMatch(mismatch.message, /[0-9a-f]{64}/);
    });

    it("judges a server path afresh at each deploy: a root re-pointed or a file swapped for a link out in between is seen", async () => {
      const base = join(dir, "swaps");
      for (const [sub, text] of [
        ["v1", "one\n"],
        ["v2", "two\n"],
        ["outside", "secret\n"],
      ] as const) {
        await mkdir(join(base, sub), { recursive: true });
        await writeFile(join(base, sub, "app.txt"), text);
      }
      await symlink(join(base, "v1", "app.txt"), join(base, "v2", "link.txt")); // into v1: out of v2
      const root = join(base, "current");
      await symlink(join(base, "v1"), root);
      const work = join(base, "work");
      const cache = new ArtifactCache(join(work, "artifacts"), 1 << 20);
      await mkdir(cache.root, { recursive: true });
      await cache.measure();
      const ctx = {
        config: { artifacts: artifactsConfigSchema.parse({ allowed_paths: [root] }), baseDir: base, workdirPath: work },
        tenant: "team-a",
        network,
        cache: { cache, holder: "deploy-1" },
      };
      const deploy = async (file: string) => {
        await checkArtifactSource(artifact(join(root, file)), ctx);
        return readFile((await fetchArtifact(artifact(join(root, file)), ctx, AbortSignal.timeout(10_000))).path!, "utf8");
      };
      const refused = async (file: string) => {
        const err = await failure(deploy(file));
        assert.match(err.message, /is not under a directory the server allows/, file);
      };

      assert.equal(await deploy("app.txt"), "one\n");
      assert.equal(await deploy("app.txt"), "one\n");
      assert.equal(cache.size(), 4, "the same content fetched again adds nothing to the cache");
      // The root re-pointed: its new target is the allowed directory, and only it.
      await rm(root);
      await symlink(join(base, "v2"), root);
      assert.equal(await deploy("app.txt"), "two\n");
      await refused("link.txt");
      assert.equal(cache.size(), 8);
      // The file swapped for a link out of the root.
      await rm(join(base, "v2", "app.txt"));
      await symlink(join(base, "outside", "app.txt"), join(base, "v2", "app.txt"));
      await refused("app.txt");
      await rm(join(base, "v2", "app.txt"));
      await writeFile(join(base, "v2", "app.txt"), "two again\n");

      // Directories removed under the server are made again, private to its user.
      await rm(join(work, "artifacts", "team-a"), { recursive: true });
      assert.equal(await deploy("app.txt"), "two again\n");
      for (const d of [join(work, "artifacts", "team-a"), join(work, "artifacts", "team-a", "tmp")]) {
        assert.equal((await stat(d)).mode & 0o777, 0o700, d);
      }
    });

    it("fetches a small or a large file whole, owner-read-only, leaving no temporary file whether it was cached already or not", async () => {
      const base = join(dir, "sizes");
      await mkdir(base, { recursive: true });
      const work = join(base, "work");
      const ctx = {
        config: { artifacts: artifactsConfigSchema.parse({ allowed_paths: [base] }), baseDir: base, workdirPath: work },
        tenant: "team-a",
        network,
      };
      const tmpLeft = async () => readdir(join(work, "artifacts", "team-a", "tmp")).catch(() => []);
      // Past what a fetch holds in memory (256 KiB), in chunks of the read stream's size and an odd end.
      const large = randomBytes(3 * 256 * 1024 + 12345);
      for (const [name, content] of [
        ["small.bin", Buffer.from("small\n")],
        ["large.bin", large],
        ["empty.bin", Buffer.alloc(0)],
      ] as const) {
        await writeFile(join(base, name), content);
        const sha256 = createHash("sha256").update(content).digest("hex");
        for (let i = 0; i < 2; i++) {
          const got = await fetchArtifact(artifact(join(base, name)), ctx, AbortSignal.timeout(10_000));
          assert.equal(got.sha256, sha256, name);
          assert.equal(got.path, join(work, "artifacts", "team-a", sha256, name));
          assert.ok((await readFile(got.path!)).equals(content), name);
          assert.equal((await stat(got.path!)).mode & 0o777, 0o400, name);
          assert.deepEqual(await tmpLeft(), [], name);
        }
        const wrong = await failure(fetchArtifact(artifact(join(base, name), "0".repeat(64)), ctx, AbortSignal.timeout(10_000)));
        assert.match(wrong.message, /does not match artifact\.sha256/);
        assert.deepEqual(await tmpLeft(), [], `${name}: nothing left by a mismatch`);
      }
    });
  });

  describe("callbacks (an envconfig's webhooks follow the same address rules)", () => {
    let receiver: Server;
    let port = 0;
    const hits: string[] = [];
    before(async () => {
      receiver = createServer((req, res) => {
        hits.push(req.url!);
        if (req.url === "/moved") return void res.writeHead(302, { location: "http://169.254.169.254/" }).end();
        req.resume();
        req.on("end", () => res.end());
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.2", r));
      port = (receiver.address() as AddressInfo).port;
    });
    after(() => receiver.close());

    const payload = { event: "succeeded", deploy: {}, sent_at: "" } as unknown as CallbackPayload;
    const config = (allowed_networks: string[]) => ({
      artifacts: artifactsConfigSchema.parse({ allowed_networks }),
      baseDir: "/",
      workdirPath: "/nonexistent-workdir",
    });
    const callback = (url: string) => ({ url, events: ["succeeded" as const], max_retries: 0, timeout: 5000 });
    const metadata: Resolver = async () => [{ address: "169.254.169.254", family: 4 }];

    it("refuses loopback, link-local and names resolving to them without connecting; delivers where allowed; follows no redirect", async () => {
      await assert.rejects(
        sendCallback(callback(`http://127.0.0.2:${port}/hook`), payload, AbortSignal.timeout(5000), config([]), network),
        (err: ManentError) => {
          assert.equal(err.code, Code.InvalidArgument);
          assert.match(err.message, /callback http:\/\/127\.0\.0\.2:\d+\/hook: host 127\.0\.0\.2 is a loopback address/);
          return true;
        },
      );
      await assert.rejects(
        sendCallback(callback("http://hooks.test/x"), payload, AbortSignal.timeout(5000), config([]), { ...network, lookup: metadata }),
        /link-local address \(169\.254\.169\.254\)/,
      );
      await assert.rejects(
        sendCallback(callback("http://[::ffff:169.254.169.254]/x"), payload, AbortSignal.timeout(5000), config([]), network),
        /link-local/,
      );
      assert.deepEqual(hits, []);
      assert.deepEqual(
        await sendCallback(
          callback(`http://127.0.0.2:${port}/hook`),
          payload,
          AbortSignal.timeout(5000),
          config(["127.0.0.2/32"]),
          network,
        ),
        { status: 200 },
      );
      await assert.rejects(
        sendCallback(callback(`http://127.0.0.2:${port}/moved`), payload, AbortSignal.timeout(5000), config(["127.0.0.2/32"]), network),
        /HTTP 302 \(redirects are not followed\)/,
      );
      assert.deepEqual(hits, ["/hook", "/moved"]);
    });
  });
});
