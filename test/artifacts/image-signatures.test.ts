import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, createPublicKey } from "node:crypto";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { parsePinnedImage } from "../../src/core/verification/image-signatures.js";
import { findHelm } from "../plugins/kubernetes/find-helm.js";
import { getObj } from "../plugins/kubernetes/helpers.js";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import { ociTool, TestRegistry } from "../support/oci-registry.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { TestCa } from "../support/test-ca.js";
import { webDeployment } from "../support/web-deployment.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);
const teamToken = "team-a-token-images-0123456789";
const terminal = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);
const password = "registry-pass-7f3a9c";

/**
 * Image signatures for kubernetes artifacts, end to end: distribution's registry over TLS with
 * htpasswd sign-in, images pushed through its API, signed by real cosign (`cosign sign --key`,
 * no transparency log), and a real manent-server reading the signatures back under manent.yml's
 * image_signatures policy before anything reaches a cluster, then deploying what verified to the
 * real control plane (plain manifests, and a Helm chart rendered for that cluster).
 */
describe("image signatures", () => {
  let pg: TestPostgres;
  let serverWs: Workspace;
  let clientWs: Workspace;
  let server: ServerProcess;
  let team: ApiClient;
  let registry: TestRegistry;
  let cp: KubeControlPlane;
  const helm = findHelm();
  const digests: Record<string, string> = {};
  let keyFingerprint = "";

  const cli = (...args: string[]) => runCli(args, { cwd: clientWs.dir, server: server.url, token: teamToken });
  const cosignEnv = () => ({
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: serverWs.path("cosign-home"),
    DOCKER_CONFIG: serverWs.path("docker"),
    SSL_CERT_FILE: serverWs.path("registry-ca.pem"),
    COSIGN_PASSWORD: "",
  });
  const cosignSign = (key: string, image: string) =>
    run(ociTool("cosign"), ["sign", "--key", serverWs.path(key, "cosign.key"), "--tlog-upload=false", "--yes", image], {
      cwd: serverWs.dir,
      env: cosignEnv(),
    });
  const image = (name: string) => `${registry.host}/acme/${name}@${digests[name]}`;
  const manifest = (images: string[]) => webDeployment(images.map((image, i) => ({ name: `c${i}`, image })));
  const submit = async (application: string, images: string[], file = "web.yaml") =>
    submitSource(
      application,
      await serverWs.write(`artifacts/${application}-${Object.keys(digests).length}-${Date.now()}/${file}`, manifest(images)),
    );
  const submitSource = async (application: string, source: string) => {
    const { id } = await team.submit({
      descriptor: {
        apiVersion: "manent/v1",
        tenant: "team-a",
        application,
        environment: "prod",
        artifact: { type: "kubernetes", name: application, version: "1.0.0", source },
      },
    });
    return finished(id);
  };
  const liveImages = async (): Promise<string[]> =>
    ((await getObj(cp, "apps/v1", "Deployment", "web", "web"))?.spec.template.spec.containers ?? []).map((c: { image: string }) => c.image);
  const finished = async (id: string): Promise<DeployRecord> => {
    let d = await team.deploy(id, 60);
    while (!terminal.has(d.status)) d = await team.deploy(id, 60);
    return d;
  };
  const assertRefused = (d: DeployRecord, reason: RegExp, code = "permission_denied") => {
    assert.equal(d.status, "failed");
    assert.equal(d.error!.code, code, d.error!.message);
    assert.match(d.error!.message, reason);
    const fetch = d.steps.find((s) => s.name === "fetch")!;
    assert.equal(fetch.status, "failed");
    assert.equal(fetch.attempts, 1, "permanent: not retried");
    assert.deepEqual(
      d.steps.filter((s) => ["validate", "checkpoint", "deploy"].includes(s.name)).map((s) => s.name),
      [],
      "nothing after the fetch step ran: no cluster was asked anything",
    );
    assert.equal(d.verification, null);
  };

  before(async () => {
    // Every image pinned by digest is pullable: the images deployed are the ones verified.
    [pg, cp] = await Promise.all([TestPostgres.start(), KubeControlPlane.start({ pullableImages: [/@sha256:[a-f0-9]{64}$/] })]);
    const access = await cp.clusterAdminAccount("web");
    serverWs = await createWorkspace("manent-images-server-");
    clientWs = await createWorkspace("manent-images-client-");
    const ca = await TestCa.create("registry-ca");
    await serverWs.write("registry-ca.pem", ca.certPem);
    await serverWs.write("cosign-home/.keep", "");
    registry = await TestRegistry.start(serverWs.path("registry"), ca, "robot", password);
    await serverWs.write(
      "docker/config.json",
      JSON.stringify({ auths: { [registry.host]: { auth: Buffer.from(`robot:${password}`).toString("base64") } } }),
    );
    for (const dir of ["release-key", "rogue-key"]) {
      await serverWs.write(`${dir}/.keep`, "");
      await run(ociTool("cosign"), ["generate-key-pair"], { cwd: serverWs.path(dir), env: cosignEnv() });
    }
    const pub = createPublicKey(await readFile(serverWs.path("release-key", "cosign.pub"), "utf8"));
    keyFingerprint = `SHA256:${createHash("sha256")
      .update(pub.export({ type: "spki", format: "der" }))
      .digest("base64")
      .replace(/=+$/, "")}`;
    for (const name of ["web", "sidecar", "unsigned", "rogue", "moved"])
      digests[name] = await registry.pushImage(`acme/${name}`, "1.0", `${name} layer`);
    await cosignSign("release-key", image("web"));
    await cosignSign("release-key", image("sidecar"));
    await cosignSign("rogue-key", image("rogue"));
    // A signature moved to another image: web's signature manifest under moved's signature tag.
    const webSig = await registry.manifest("acme/web", `sha256-${digests.web!.slice(7)}.sig`);
    for (const blob of JSON.parse(webSig.toString()).layers as { digest: string }[]) assert.ok(blob.digest);
    digests.moved2 = await registry.pushImage("acme/web", "2.0", "moved layer");
    await registry.pushManifest("acme/web", `sha256-${digests.moved2.slice(7)}.sig`, webSig);

    await serverWs.write("registry-password", `${password}\n`);
    await serverWs.write("wrong-password", "not-the-password\n");
    const policy = (name: string, application: string, passwordFile: string) => ({
      name,
      application,
      image_signatures: {
        public_keys: [{ id: "images-2026", file: "./release-key/cosign.pub" }],
        registries: [
          { host: registry.host, ca_file: "./registry-ca.pem", username: "robot", password: `file:${serverWs.path(passwordFile)}` },
        ],
      },
    });
    const databaseUrl = await pg.createDatabase();
    const config = await serverWs.write(
      "manent.yml",
      manentYml(databaseUrl, {
        plugins: { kubernetes: {} },
        auth: { tokens: [{ name: "team-a", tenant: "team-a", sha256: createHash("sha256").update(teamToken).digest("hex") }] },
        verification: { policies: [policy("signed-images", "web", "registry-password"), policy("bad-creds", "other", "wrong-password")] },
      }),
    );
    await serverWs.write("envconfig/team-a/web/web/prod.yml", {
      plugin: "kubernetes",
      targets: [{ host: cp.host, port: cp.port }],
      params: { namespace: "web", token_secret: "kube-token", ca_secret: "kube-ca", wait_timeout: "60s" },
      secrets: [
        { name: "kube-token", ref: `file:${await serverWs.write("kube-token", access.token)}` },
        { name: "kube-ca", ref: `file:${await serverWs.write("kube-ca.pem", access.caPem)}` },
      ],
    });
    await serverWs.write("envconfig/team-a/other/other/prod.yml", {
      plugin: "kubernetes",
      // No cluster listens here: the registry refuses the policy's credentials first.
      targets: [{ host: "127.0.0.1", port: 1 }],
      params: { namespace: "web", token_secret: "kube-token" },
      secrets: [{ name: "kube-token", ref: `file:${await serverWs.write("other-token", "not-a-real-token\n")}` }],
    });
    assert.ok(helm, "helm is in .tools/bin (scripts/ci/kubernetes.sh)");
    // helm as an operator names it for the server (MANENT_HELM, docs/reference/environment.md).
    server = await startServer(config, { cwd: serverWs.dir, env: { MANENT_HELM: helm } });
    team = new ApiClient(server.url, teamToken);
  });
  after(async () => {
    await server?.stop();
    await registry?.stop();
    await cp?.stop();
    await pg?.stop();
  });

  it("verifies every image's cosign signature in its registry before the cluster is asked, records each, and deploys them", async () => {
    await clientWs.write("k8s/web.yaml", manifest([image("web"), image("sidecar"), image("web")]));
    await clientWs.write("web.yml", {
      apiVersion: "manent/v1",
      tenant: "team-a",
      application: "web",
      environment: "prod",
      artifact: { type: "kubernetes", name: "web", version: "1.0.0", source: "k8s/web.yaml" },
    });
    const out = await cli("deploy", "-f", "web.yml", "-o", "text");
    const [latest] = (await team.list({ tenant: "team-a", application: "web" })).deploys;
    const d = await finished(latest!.id);
    // Verified at the fetch step, before validate asked the cluster anything; then deployed.
    const fetch = d.steps.find((s) => s.name === "fetch")!;
    assert.equal(fetch.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(await liveImages(), [image("web"), image("sidecar"), image("web")]);
    assert.deepEqual(d.verification, [
      { policy: "signed-images", digest: digests.web, method: "cosign", key: `images-2026 ${keyFingerprint}`, image: image("web") },
      { policy: "signed-images", digest: digests.sidecar, method: "cosign", key: `images-2026 ${keyFingerprint}`, image: image("sidecar") },
    ]);
    assert.deepEqual(JSON.parse(fetch.output!.result).verification, d.verification);
    assert.ok(out.stdout.includes(`verified ${image("web")}: cosign images-2026 ${keyFingerprint} (policy signed-images)`), out.stdout);
  });

  it("renders a Helm chart for the cluster, verifies the images it runs there and deploys it; an unsigned one changes nothing", async () => {
    const chart = async (version: string, img: string) => {
      const dir = `charts-src/${version}/web`;
      await serverWs.write(`${dir}/Chart.yaml`, `apiVersion: v2\nname: web\nversion: ${version}\n`);
      await serverWs.write(`${dir}/values.yaml`, `image: "${img}"\n`);
      await serverWs.write(
        `${dir}/templates/deployment.yaml`,
        manifest(["{{ .Values.image }}"]).replace("metadata: {name: web}", "metadata: {name: {{ .Release.Name }}}"),
      );
      await run(helm!, ["package", serverWs.path(dir), "-d", serverWs.path("charts")]);
      return serverWs.path("charts", `web-${version}.tgz`);
    };
    const d = await submitSource("web", await chart("0.1.0", image("sidecar")));
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(d.verification, [
      { policy: "signed-images", digest: digests.sidecar, method: "cosign", key: `images-2026 ${keyFingerprint}`, image: image("sidecar") },
    ]);
    assert.equal((await liveImages())[0], image("sidecar"));

    const refused = await submitSource("web", await chart("0.2.0", image("unsigned")));
    assertRefused(refused, /it carries no cosign signature/);
    assert.match(
      refused.error!.message,
      new RegExp(
        `^image "${image("unsigned").replace(/[.]/g, "\\.")}" \\(chart web for cluster ${cp.host.replace(/[.]/g, "\\.")}: Deployment/web: spec\\.template\\.spec\\.containers\\[0\\]\\.image\\) is refused by verification policy signed-images`,
      ),
    );
    assert.equal((await liveImages())[0], image("sidecar"), "the release in service is untouched");
  });

  it("refuses an unsigned image, one signed by another key, a signature moved from another image, and an unlisted registry", async () => {
    const cases: [string, string[], RegExp][] = [
      [
        "unsigned",
        [image("web"), image("unsigned")],
        /it carries no cosign signature \(no tag sha256-[0-9a-f]{64}\.sig in 127\.0\.0\.1:\d+\/acme\/unsigned\)/,
      ],
      ["another key", [image("rogue")], /no signature verifies with the policy's image_signatures\.public_keys/],
      ["a moved signature", [`${registry.host}/acme/web@${digests.moved2}`], /the signature is for another image digest/],
      [
        "an unlisted registry",
        [`docker.io/library/nginx@sha256:${"c".repeat(64)}`],
        /registry docker\.io is not one of the policy's image_signatures\.registries \(127\.0\.0\.1:\d+\)/,
      ],
    ];
    for (const [what, images, reason] of cases) {
      const d = await submit("web", images);
      assertRefused(d, reason);
      assert.match(
        d.error!.message,
        /^image ".*" \(web\.yaml: Deployment\/web: spec\.template\.spec\.containers\[\d\]\.image\) is refused by verification policy signed-images \(.*manent\.yml\): /,
        what,
      );
      assert.equal(d.error!.details!.policy, "signed-images");
    }
  });

  it("refuses a tag-only image, naming the file and the field, whatever the envconfig says", async () => {
    const d = await submit("web", [image("web"), `${registry.host}/acme/web:1.0`]);
    assertRefused(
      d,
      /require_image_digest is set and these images are not pinned by @sha256: digest .*web\.yaml: Deployment\/web: spec\.template\.spec\.containers\[1\]\.image/,
      "invalid_argument",
    );
  });

  it("refuses when the registry refuses the policy's credentials, never showing the password", async () => {
    const d = await submit("other", [image("web")]);
    assertRefused(
      d,
      /registry 127\.0\.0\.1:\d+ answered 401 to GET manifests\/sha256-[0-9a-f]{64}\.sig \(check the policy's username and password\)/,
    );
    assert.ok(!JSON.stringify(d).includes("not-the-password") && !JSON.stringify(d).includes(password));
  });

  it("parses image references as a registry does", () => {
    const d = `sha256:${"a".repeat(64)}`;
    assert.deepEqual(parsePinnedImage(`nginx@${d}`), { host: "docker.io", repository: "library/nginx", digest: d });
    assert.deepEqual(parsePinnedImage(`ghcr.io/acme/web:1.0@${d}`), { host: "ghcr.io", repository: "acme/web", digest: d });
    assert.deepEqual(parsePinnedImage(`localhost:5000/web@${d}`), { host: "localhost:5000", repository: "web", digest: d });
    assert.equal(parsePinnedImage("nginx:1.27"), undefined);
    assert.equal(parsePinnedImage(`../etc@${d}`), undefined);
    assert.equal(parsePinnedImage(`Web@${d}`), undefined);
  });
});
