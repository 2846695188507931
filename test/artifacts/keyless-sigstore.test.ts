import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { readdir } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { verificationPolicySchema } from "../../src/core/config/verification-config.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { TestSigstore, type KeylessSigning } from "../support/test-sigstore.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const teamToken = "team-a-token-keyless-0123456789";
const terminal = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);
const workflow = "https://ci.acme.test/acme/shop/.ci/release.yml@refs/heads/main";
const ciIssuer = "https://token.ci.acme.test";
const minute = 60_000;

/**
 * Keyless Sigstore bundles through a real manent-server and the real CLI, verified by sigstore-js
 * against a trusted_root.json of the test's own Sigstore (test/support/test-sigstore.ts): a CA
 * issuing short-lived certificates with a subject alternative name, an OIDC issuer and an SCT, and
 * a transparency log whose signed entry timestamp and checkpoint vouch for the signing time.
 */
describe("keyless Sigstore verification", () => {
  let pg: TestPostgres;
  let serverWs: Workspace;
  let clientWs: Workspace;
  let server: ServerProcess;
  let team: ApiClient;
  let sigstore: TestSigstore;
  let foreign: TestSigstore;

  const cli = (...args: string[]) => runCli(args, { cwd: clientWs.dir, server: server.url, token: teamToken });
  /** A certificate valid for ten minutes from a minute ago, entered in the log thirty seconds ago: a CI job's signature. */
  const signing = (o: Partial<KeylessSigning> = {}): KeylessSigning => {
    const now = Date.now();
    return {
      subject: workflow,
      issuer: ciIssuer,
      notBefore: new Date(now - minute),
      notAfter: new Date(now + 9 * minute),
      integratedTime: new Date(now - minute / 2),
      ...o,
    };
  };
  const descriptor = (source: string, extra: Record<string, unknown> = {}) => ({
    apiVersion: "manent/v1",
    tenant: "team-a",
    application: "shop",
    environment: "prod",
    artifact: { type: "file", name: "shop", version: "1.0.0", source, ...extra },
  });
  const finished = async (id: string): Promise<DeployRecord> => {
    let d = await team.deploy(id, 60);
    while (!terminal.has(d.status)) d = await team.deploy(id, 60);
    return d;
  };
  const touched = async () => (await readdir(serverWs.path("state")).catch(() => [] as string[])).filter((f) => !f.startsWith("."));

  before(async () => {
    pg = await TestPostgres.start();
    serverWs = await createWorkspace("manent-keyless-server-");
    clientWs = await createWorkspace("manent-keyless-client-");
    sigstore = await TestSigstore.create("acme");
    foreign = await TestSigstore.create("foreign");
    await serverWs.write("keys/trusted_root.json", JSON.stringify(sigstore.trustedRoot()));
    const databaseUrl = await pg.createDatabase();
    const config = await serverWs.write(
      "manent.yml",
      manentYml(databaseUrl, {
        auth: { tokens: [{ name: "team-a", tenant: "team-a", sha256: createHash("sha256").update(teamToken).digest("hex") }] },
        verification: {
          policies: [
            {
              name: "prod-keyless",
              environment: "prod",
              sigstore: {
                keyless: {
                  trusted_root: "./keys/trusted_root.json",
                  identities: [
                    { subject: workflow, issuer: ciIssuer },
                    { subject_regexp: "[a-z]+@release\\.acme\\.test", issuer_regexp: "https://accounts\\.acme\\.test" },
                  ],
                },
              },
            },
          ],
        },
      }),
    );
    await serverWs.write("envconfig/team-a/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-prod" }],
      params: { state_dir: serverWs.path("state") },
      max_retries: 3,
      retry_interval: "10ms",
    });
    server = await startServer(config, { cwd: serverWs.dir });
    team = new ApiClient(server.url, teamToken);
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("deploys an artifact whose bundle's certificate names an accepted identity, and records it", async () => {
    const bytes = Buffer.from("release bytes\n");
    await clientWs.write("dist/shop.tar", bytes.toString());
    // Beside the artifact, as `cosign sign-blob --bundle` would leave it: the CLI sends it along.
    await clientWs.write("dist/shop.tar.sigstore.json", await sigstore.sign(bytes, signing()));
    await clientWs.write("prod.yml", descriptor("dist/shop.tar"));
    const out = await cli("deploy", "-f", "prod.yml", "-o", "text");
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const sha = createHash("sha256").update(bytes).digest("hex");
    assert.match(
      out.stdout,
      new RegExp(
        `verified sha256:${sha}: sigstore ${workflow.replace(/[.]/g, "\\.")} \\(issuer https://token\\.ci\\.acme\\.test\\) certificate SHA256:[A-Za-z0-9+/]{43} \\(policy prod-keyless\\)`,
      ),
    );
    const [latest] = (await team.list({ tenant: "team-a", environment: "prod" })).deploys;
    const d = await team.deploy(latest!.id);
    assert.equal(d.status, "succeeded");
    assert.equal(d.verification!.length, 1);
    const [v] = d.verification!;
    assert.deepEqual(
      { ...v, key: v!.key.replace(/SHA256:.*/, "SHA256:…") },
      {
        policy: "prod-keyless",
        digest: `sha256:${sha}`,
        method: "sigstore",
        identity: workflow,
        issuer: ciIssuer,
        key: "certificate SHA256:…",
      },
    );
    assert.ok((await touched()).length > 0, "the target was deployed");
  });

  it("accepts an identity by pattern, and Fulcio's older issuer extension", async () => {
    const bytes = Buffer.from("pattern bytes\n");
    const artifact = await serverWs.write("artifacts/pattern.tar", bytes.toString());
    const signature = await serverWs.write(
      "sigs/pattern.sigstore.json",
      await sigstore.sign(bytes, signing({ subject: "robot@release.acme.test", issuer: "https://accounts.acme.test", issuerOid: "v1" })),
    );
    const d = await finished((await team.submit({ descriptor: descriptor(artifact, { signature }) })).id);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.verification![0]!.identity, "robot@release.acme.test");
    assert.equal(d.verification![0]!.issuer, "https://accounts.acme.test");
  });

  it("refuses, before any target changes, every bundle the policy does not vouch for, each with its reason", async () => {
    const bytes = Buffer.from("the real bytes\n");
    const artifact = await serverWs.write("artifacts/real.tar", bytes.toString());
    const tampered = await serverWs.write("artifacts/tampered.tar", "the real bytes, and a backdoor\n");
    const now = Date.now();
    const good = JSON.parse(await sigstore.sign(bytes, signing())) as {
      verificationMaterial: { tlogEntries: unknown[] };
      messageSignature: { messageDigest: { digest: string } };
    };
    const key = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    const cases: [string, string, string, RegExp][] = [
      [
        "another workflow",
        artifact,
        await sigstore.sign(bytes, signing({ subject: "https://ci.acme.test/acme/other/.ci/release.yml@refs/heads/main" })),
        /the certificate is for "https:\/\/ci\.acme\.test\/acme\/other\/\.ci\/release\.yml@refs\/heads\/main" issued by "https:\/\/token\.ci\.acme\.test", not one of the policy's sigstore\.keyless\.identities/,
      ],
      [
        "another issuer",
        artifact,
        await sigstore.sign(bytes, signing({ issuer: "https://evil.test" })),
        /issued by "https:\/\/evil\.test", not one of the policy's sigstore\.keyless\.identities/,
      ],
      [
        "a pattern that matches only part of the subject",
        artifact,
        await sigstore.sign(bytes, signing({ subject: "robot@release.acme.test.evil.test", issuer: "https://accounts.acme.test" })),
        /not one of the policy's sigstore\.keyless\.identities/,
      ],
      [
        "a certificate from another CA",
        artifact,
        await foreign.sign(bytes, signing()),
        /the certificate was not issued by a certificate authority of .*trusted_root\.json/,
      ],
      ["a tampered artifact", tampered, JSON.stringify(good), /the bundle's message digest is of other bytes than the artifact's/],
      [
        "a tampered artifact whose bundle's digest was rewritten to match",
        tampered,
        JSON.stringify({
          ...good,
          messageSignature: {
            ...good.messageSignature,
            messageDigest: {
              algorithm: "SHA2_256",
              digest: createHash("sha256").update("the real bytes, and a backdoor\n").digest("base64"),
            },
          },
        }),
        /the transparency log entry is for another signature or other bytes|does not verify with the certificate's key/,
      ],
      [
        "a certificate expired when the log entered the signature",
        artifact,
        await sigstore.sign(
          bytes,
          signing({
            notBefore: new Date(now - 30 * minute),
            notAfter: new Date(now - 20 * minute),
            integratedTime: new Date(now - minute),
          }),
        ),
        /the certificate was not valid at the time its transparency log entry or timestamp vouches for/,
      ],
      [
        "no transparency log entry",
        artifact,
        JSON.stringify({ ...good, verificationMaterial: { ...good.verificationMaterial, tlogEntries: [] } }),
        /the bundle carries 0 verifiable timestamps, and timestamp_threshold is 1/,
      ],
      [
        "a certificate without an SCT",
        artifact,
        await sigstore.sign(bytes, signing({ sct: false })),
        /the certificate carries 0 SCTs, and ctlog_threshold is 1/,
      ],
      [
        "a key-based bundle where only keyless is accepted",
        artifact,
        JSON.stringify({
          mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
          verificationMaterial: { publicKey: { hint: "release-2026" }, tlogEntries: [] },
          messageSignature: {
            messageDigest: { algorithm: "SHA2_256", digest: createHash("sha256").update(bytes).digest("base64") },
            signature: sign("sha256", bytes, key).toString("base64"),
          },
        }),
        /this policy accepts only keyless certificates \(sigstore\.keyless\)/,
      ],
    ];
    const before = await touched();
    for (const [i, [what, source, bundle, reason]] of cases.entries()) {
      const signature = await serverWs.write(`sigs/refused-${i}.sigstore.json`, bundle);
      const d = await finished((await team.submit({ descriptor: descriptor(source, { signature }) })).id);
      assert.equal(d.status, "failed", what);
      assert.equal(d.error!.code, "permission_denied", what);
      assert.match(
        d.error!.message,
        /^artifact shop 1\.0\.0 \(sha256:[0-9a-f]{64}\) is refused by verification policy prod-keyless \(.*manent\.yml\): /,
      );
      assert.match(d.error!.message, reason, what);
      assert.equal(d.error!.details!.field, "artifact.signature");
      assert.equal(d.steps.find((s) => s.name === "fetch")!.attempts, 1, `${what}: permanent, not retried`);
      assert.deepEqual(
        d.steps.filter((s) => ["validate", "checkpoint", "deploy"].includes(s.name)).map((s) => s.name),
        [],
        `${what}: nothing after the fetch step ran`,
      );
      assert.deepEqual(d.targets, [], what);
      assert.equal(d.verification, null);
    }
    assert.deepEqual(await touched(), before, "no target changed");
  });

  it("refuses an artifact without a bundle, through the CLI", async () => {
    await clientWs.write("dist/unsigned.tar", "unsigned\n");
    await clientWs.write("unsigned.yml", descriptor("dist/unsigned.tar"));
    const out = await cli("deploy", "-f", "unsigned.yml");
    assert.equal(out.code, 1, out.stdout + out.stderr);
    assert.match(out.stdout + out.stderr, /is refused by verification policy prod-keyless \(.*manent\.yml\): it carries no signature/);
  });

  it("refuses a trusted root that is not one, naming the file and the field", async () => {
    await serverWs.write("keys/broken_root.json", JSON.stringify({ ...sigstore.trustedRoot(), tlogs: [{ logId: { keyId: "AAAA" } }] }));
    const { loadTrustedRoot } = await import("../../src/core/verification/sigstore-trusted-root.js");
    await assert.rejects(
      loadTrustedRoot(serverWs.path("keys/broken_root.json")),
      /the trusted root .*broken_root\.json is not a Sigstore TrustedRoot: tlogs\.0\.publicKey: /,
    );
    await assert.rejects(loadTrustedRoot(serverWs.path("keys/absent.json")), /cannot read the trusted root .*absent\.json: ENOENT/);
  });

  it("validates keyless policies in manent.yml", () => {
    const policy = (identity: Record<string, unknown>) =>
      verificationPolicySchema.safeParse({ name: "p", sigstore: { keyless: { trusted_root: "root.json", identities: [identity] } } });
    assert.ok(policy({ subject: "a@b.test", issuer: "https://i.test" }).success);
    assert.match(
      JSON.stringify(policy({ subject: "a", subject_regexp: "a", issuer: "i" }).error),
      /exactly one of subject and subject_regexp/,
    );
    assert.match(JSON.stringify(policy({ subject: "a" }).error), /exactly one of issuer and issuer_regexp/);
    assert.match(JSON.stringify(policy({ subject_regexp: "(", issuer: "i" }).error), /not a valid regular expression/);
    const defaults = verificationPolicySchema.parse({
      name: "p",
      sigstore: { keyless: { trusted_root: "root.json", identities: [{ subject: "a", issuer: "i" }] } },
    });
    assert.deepEqual(
      [
        defaults.sigstore!.keyless!.tlog_threshold,
        defaults.sigstore!.keyless!.ctlog_threshold,
        defaults.sigstore!.keyless!.timestamp_threshold,
      ],
      [1, 1, 1],
    );
    assert.match(
      JSON.stringify(verificationPolicySchema.safeParse({ name: "p", sigstore: {} }).error),
      /give public_keys, keyless or both/,
    );
  });
});
