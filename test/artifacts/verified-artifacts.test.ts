import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { webDeployment } from "../support/web-deployment.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);
const teamToken = "team-a-token-verify-0123456789";
const terminal = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);

/**
 * Verified artifacts through a real manent-server and the real CLI, with real signatures: OpenSSH
 * signatures made by `ssh-keygen -Y sign` and Sigstore bundles signed with a P-256 key, checked
 * against manent.yml's verification policies (prod: SSH, stage: Sigstore, test: none). A refusal
 * ends the deploy at its fetch step: no target is touched.
 */
describe("verified artifacts", () => {
  let pg: TestPostgres;
  let serverWs: Workspace;
  let clientWs: Workspace;
  let server: ServerProcess;
  let team: ApiClient;
  let releaseFingerprint = "";
  let sigstoreKey: KeyObject;
  let otherSigstoreKey: KeyObject;
  let sigstoreFingerprint = "";

  const cli = (...args: string[]) => runCli(args, { cwd: clientWs.dir, server: server.url, token: teamToken });
  const sshSign = async (key: string, file: string, namespace = "manent-artifact") => {
    await run("ssh-keygen", ["-Y", "sign", "-f", serverWs.path("keys", key), "-n", namespace, file]);
    return `${file}.sig`;
  };
  const bundle = (data: Buffer, o: { key?: KeyObject; hint?: string; digestOf?: Buffer } = {}) =>
    JSON.stringify({
      mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
      verificationMaterial: { publicKey: { hint: o.hint ?? "release-2026" }, tlogEntries: [] },
      messageSignature: {
        messageDigest: {
          algorithm: "SHA2_256",
          digest: createHash("sha256")
            .update(o.digestOf ?? data)
            .digest("base64"),
        },
        signature: sign("sha256", data, o.key ?? sigstoreKey).toString("base64"),
      },
    });
  const descriptor = (environment: string, source: string, extra: Record<string, unknown> = {}) => ({
    apiVersion: "manent/v1",
    tenant: "team-a",
    application: "shop",
    environment,
    artifact: { type: "file", name: "shop", version: "1.0.0", source, ...extra },
  });
  const finished = async (id: string): Promise<DeployRecord> => {
    let d = await team.deploy(id, 60);
    while (!terminal.has(d.status)) d = await team.deploy(id, 60);
    return d;
  };
  const touched = async (environment: string) =>
    (await readdir(serverWs.path("state", environment)).catch(() => [] as string[])).filter((f) => !f.startsWith("."));

  /** A deploy refused by a policy: failed at fetch, permission_denied, naming artifact, policy and reason; nothing deployed. */
  const assertRefused = (d: DeployRecord, policy: string, reason: RegExp) => {
    assert.equal(d.status, "failed", JSON.stringify(d.error));
    assert.equal(d.error!.code, "permission_denied");
    assert.match(
      d.error!.message,
      new RegExp(`^artifact shop 1\\.0\\.0 \\(sha256:[0-9a-f]{64}\\) is refused by verification policy ${policy} `),
    );
    assert.match(d.error!.message, reason);
    assert.equal(d.error!.details!.policy, policy);
    const fetch = d.steps.find((s) => s.name === "fetch")!;
    assert.equal(fetch.status, "failed");
    assert.equal(fetch.attempts, 1, "a refusal is permanent: not retried");
    assert.deepEqual(
      d.steps.filter((s) => ["validate", "checkpoint", "deploy"].includes(s.name)),
      [],
      "nothing after the fetch step ran",
    );
    assert.deepEqual(d.targets, []);
    assert.equal(d.verification, null);
  };

  before(async () => {
    pg = await TestPostgres.start();
    serverWs = await createWorkspace("manent-verify-server-");
    clientWs = await createWorkspace("manent-verify-client-");
    for (const key of ["release", "rogue"]) {
      await serverWs.write(`keys/.keep`, "");
      await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", serverWs.path("keys", key)]);
    }
    const releasePub = (await readFile(serverWs.path("keys", "release.pub"), "utf8")).trim();
    releaseFingerprint = /(SHA256:\S+)/.exec((await run("ssh-keygen", ["-lf", serverWs.path("keys", "release.pub")])).stdout)![1]!;
    await serverWs.write("keys/allowed_signers", `release@example.com ${releasePub}\n`);
    sigstoreKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    otherSigstoreKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    const spki = sigstoreKey.export({ format: "pem", type: "pkcs8" });
    const publicKey = (await import("node:crypto")).createPublicKey(spki);
    await serverWs.write("keys/release-2026.pem", publicKey.export({ type: "spki", format: "pem" }) as string);
    sigstoreFingerprint = `SHA256:${createHash("sha256")
      .update(publicKey.export({ type: "spki", format: "der" }))
      .digest("base64")
      .replace(/=+$/, "")}`;

    const databaseUrl = await pg.createDatabase();
    const config = await serverWs.write(
      "manent.yml",
      manentYml(databaseUrl, {
        plugins: { noop: { artifact_types: ["file"] }, kubernetes: {} },
        auth: { tokens: [{ name: "team-a", tenant: "team-a", sha256: createHash("sha256").update(teamToken).digest("hex") }] },
        verification: {
          policies: [
            { name: "prod-ssh", environment: "prod", ssh: { allowed_signers: "./keys/allowed_signers" } },
            { name: "web-images", application: "web", image_digests: true },
            {
              name: "stage-sigstore",
              environment: "stage*",
              sigstore: { public_keys: [{ id: "release-2026", file: "./keys/release-2026.pem" }] },
            },
          ],
        },
      }),
    );
    for (const env of ["prod", "stage", "test"]) {
      await serverWs.write(`envconfig/team-a/shop/shop/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `shop-${env}` }],
        params: { state_dir: serverWs.path("state", env) },
        max_retries: 3,
        retry_interval: "10ms",
      });
    }
    // The tenant's envconfig turns the plugin's digest check off: the operator's policy holds all the same.
    await serverWs.write("envconfig/team-a/web/web/test.yml", {
      plugin: "kubernetes",
      targets: [{ host: "127.0.0.1", port: 1 }],
      params: { namespace: "web", token_secret: "kube-token", require_image_digest: "false" },
      secrets: [{ name: "kube-token", ref: `file:${await serverWs.write("kube-token", "not-a-real-token\n")}` }],
    });
    server = await startServer(config, { cwd: serverWs.dir });
    team = new ApiClient(server.url, teamToken);
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("deploys a local artifact with the SSH signature beside it, and records who signed which bytes", async () => {
    const artifact = await clientWs.write("dist/shop-1.0.0.tar", "signed bytes\n");
    await sshSign("release", artifact);
    await clientWs.write("prod.yml", descriptor("prod", "dist/shop-1.0.0.tar"));
    const out = await cli("deploy", "-f", "prod.yml", "-o", "text");
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const sha = createHash("sha256").update("signed bytes\n").digest("hex");
    const line = `verified sha256:${sha}: ssh release@example.com ${releaseFingerprint} (policy prod-ssh)`;
    assert.ok(out.stdout.includes(line), out.stdout);

    const [latest] = (await team.list({ tenant: "team-a", environment: "prod" })).deploys;
    const d = await team.deploy(latest!.id);
    assert.equal(d.status, "succeeded");
    assert.deepEqual(d.verification, [
      {
        policy: "prod-ssh",
        digest: `sha256:${sha}`,
        method: "ssh",
        identity: "release@example.com",
        key: releaseFingerprint,
        key_type: "ED25519",
      },
    ]);
    // The fetch step's output carries it too, and the signature travelled as an upload, as the artifact did.
    assert.deepEqual(JSON.parse(d.steps.find((s) => s.name === "fetch")!.output!.result).verification, d.verification);
    assert.match(
      (d.request.descriptor as { artifact: { signature: string } }).artifact.signature,
      /^upload:[0-9a-f]{64}\/shop-1\.0\.0\.tar\.sig$/,
    );
    assert.ok((await touched("prod")).length > 0, "the target was deployed");
    // The signature's upload is kept as the artifact's is: a retry or a redeploy of this release reads it again.
    const signatureSha = /^upload:([0-9a-f]{64})\//.exec(
      (d.request.descriptor as { artifact: { signature: string } }).artifact.signature,
    )![1]!;
    const del = await fetch(new URL(`/api/v1/uploads/${signatureSha}`, server.url), {
      method: "DELETE",
      headers: { authorization: `Bearer ${teamToken}` },
    });
    assert.equal(del.status, 409);
    assert.match(((await del.json()) as { error: { message: string } }).error.message, new RegExp(d.id));

    const status = await cli("status", latest!.id, "-o", "text");
    assert.equal(status.code, 0, status.stderr);
    assert.ok(status.stdout.includes(line), status.stdout);
  });

  it("refuses an unsigned artifact before any target changes, in a deploy and a dry run alike", async () => {
    await clientWs.write("dist/unsigned.tar", "nobody signed this\n");
    await clientWs.write("unsigned.yml", descriptor("prod", "dist/unsigned.tar"));
    const before = await touched("prod");
    for (const args of [
      ["deploy", "-f", "unsigned.yml"],
      ["deploy", "--dry-run", "-f", "unsigned.yml"],
    ]) {
      const out = await cli(...args);
      assert.equal(out.code, 1, out.stdout + out.stderr);
      assert.match(
        out.stdout + out.stderr,
        /artifact shop 1\.0\.0 \(sha256:[0-9a-f]{64}\) is refused by verification policy prod-ssh \(.*manent\.yml\): it carries no signature/,
      );
    }
    const deploys = (await team.list({ tenant: "team-a", environment: "prod" })).deploys.slice(0, 2);
    for (const summary of deploys) assertRefused(await finished(summary.id), "prod-ssh", /carries no signature/);
    assert.deepEqual(await touched("prod"), before, "no target changed");
  });

  it("refuses hostile SSH signatures, each with its reason", async () => {
    const artifact = await serverWs.write("artifacts/hostile.tar", "the real bytes\n");
    const other = await serverWs.write("artifacts/other.tar", "other bytes\n");
    const rogue = await serverWs.write("sigs/rogue.tar", "the real bytes\n");
    const namespaced = await serverWs.write("sigs/namespaced.tar", "the real bytes\n");
    const cases: [string, string, RegExp][] = [
      ["a key not in allowed_signers", await sshSign("rogue", rogue), /the signing key is not in allowed_signers/],
      ["a signature over other bytes", await sshSign("release", other), /the signature is not over these bytes/],
      ["another namespace", await sshSign("release", namespaced, "file"), /the signature was made in another namespace/],
      [
        "garbage",
        await serverWs.write("sigs/garbage.sig", "\u0000\u0001 not a signature"),
        /neither an SSH signature .* nor a Sigstore bundle/,
      ],
      [
        "a truncated armour",
        await serverWs.write("sigs/truncated.sig", "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"),
        /ssh-keygen: |not in allowed_signers/,
      ],
      [
        "a Sigstore bundle where SSH is wanted",
        await serverWs.write("sigs/bundle.json", bundle(Buffer.from("the real bytes\n"))),
        /accepts only SSH signatures/,
      ],
    ];
    const before = await touched("prod");
    for (const [what, signature, reason] of cases) {
      const { id } = await team.submit({ descriptor: descriptor("prod", artifact, { signature }) });
      const d = await finished(id);
      assertRefused(d, "prod-ssh", reason);
      assert.ok(true, what);
    }
    assert.deepEqual(await touched("prod"), before, "no target changed");
  });

  it("verifies a Sigstore bundle offline against the policy's public key; refuses malformed, foreign and mismatched ones", async () => {
    const bytes = Buffer.from("stage bytes\n");
    const artifact = await clientWs.write("dist/stage.tar", bytes.toString());
    await clientWs.write("dist/stage.bundle.json", bundle(bytes));
    await clientWs.write("stage.yml", descriptor("stage", "dist/stage.tar", { signature: "dist/stage.bundle.json" }));
    const out = await cli("deploy", "-f", "stage.yml", "-o", "text");
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const sha = createHash("sha256").update(bytes).digest("hex");
    assert.ok(
      out.stdout.includes(`verified sha256:${sha}: sigstore release-2026 ${sigstoreFingerprint} (policy stage-sigstore)`),
      out.stdout,
    );

    const server = serverWs.path("artifacts", "stage.tar");
    await serverWs.write("artifacts/stage.tar", bytes.toString());
    const cases: [string, string, RegExp][] = [
      ["not JSON", "{ not json", /neither an SSH signature|not valid JSON/],
      ["malformed", JSON.stringify({ mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json" }), /malformed Sigstore bundle/],
      [
        "a key not in the policy",
        bundle(bytes, { hint: "rogue" }),
        /names key "rogue", not one of the policy's sigstore\.public_keys \(release-2026\)/,
      ],
      ["signed by another key", bundle(bytes, { key: otherSigstoreKey }), /does not verify with key release-2026/],
      ["a signature over other bytes", bundle(Buffer.from("other\n")), /message digest is of other bytes/],
      [
        "a digest of these bytes over a signature of others",
        bundle(Buffer.from("other\n"), { digestOf: bytes }),
        /does not verify with key release-2026/,
      ],
      [
        "an SSH signature where Sigstore is wanted",
        await readFile(await sshSign("release", server), "utf8"),
        /accepts only Sigstore bundles/,
      ],
    ];
    for (const [i, [what, content, reason]] of cases.entries()) {
      const signature = await serverWs.write(`sigs/stage-${i}.sigstore.json`, content);
      const d = await finished((await team.submit({ descriptor: descriptor("stage", server, { signature }) })).id);
      assertRefused(d, "stage-sigstore", reason);
      assert.ok(true, what);
    }
  });

  it("applies no policy where none matches; a signature source goes through the artifact rules", async () => {
    const { id } = await team.submit({ descriptor: descriptor("test", await serverWs.write("artifacts/free.tar", "free\n")) });
    const d = await finished(id);
    assert.equal(d.status, "succeeded");
    assert.equal(d.verification, null);

    const res = await fetch(new URL("/api/v1/deploys", server.url), {
      method: "POST",
      headers: { authorization: `Bearer ${teamToken}`, "content-type": "application/json" },
      body: JSON.stringify({ descriptor: descriptor("prod", serverWs.path("artifacts/free.tar"), { signature: "/etc/passwd" }) }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: { message: string; details: { field: string } } };
    assert.match(body.error.message, /artifact\.signature: \/etc\/passwd is not under a directory the server allows/);
    assert.equal(body.error.details.field, "artifact.signature");
  });

  it("image_digests: a tag-only image is refused at validation, naming the file and the field, whatever the envconfig says", async () => {
    const digest = `sha256:${"b".repeat(64)}`;
    const manifest = (image: string) =>
      webDeployment([
        { name: "sidecar", image: `busybox@${digest}` },
        { name: "web", image },
      ]);
    await clientWs.write("k8s/web.yaml", manifest("nginx:1.27"));
    await clientWs.write("web.yml", {
      apiVersion: "manent/v1",
      tenant: "team-a",
      application: "web",
      environment: "test",
      artifact: { type: "kubernetes", name: "web", version: "1.0.0", source: "k8s/web.yaml" },
    });
    for (const args of [
      ["deploy", "-f", "web.yml"],
      ["deploy", "--dry-run", "-f", "web.yml"],
    ]) {
      const out = await cli(...args);
      assert.equal(out.code, 1, out.stdout + out.stderr);
    }
    const [dryRun, deploy] = (await team.list({ tenant: "team-a", application: "web" })).deploys;
    for (const summary of [dryRun!, deploy!]) {
      const d = await finished(summary.id);
      assert.equal(d.status, "failed");
      assert.equal(d.error!.code, "invalid_argument", d.error!.message);
      assert.match(
        d.error!.message,
        /require_image_digest is set and these images are not pinned by @sha256: digest \(name@sha256:<digest>\): web\.yaml: Deployment\/web: spec\.template\.spec\.containers\[1\]\.image "nginx:1\.27"$/,
      );
      assert.equal(d.error!.details!.field, "spec.template.spec.containers[1].image");
      assert.equal(d.steps.find((s) => s.name === "validate")!.status, "failed");
      assert.deepEqual(
        d.steps.filter((s) => ["checkpoint", "deploy"].includes(s.name)),
        [],
        "the cluster was not asked anything",
      );
    }
  });
});
