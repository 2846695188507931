import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import { generatePki } from "../../support/kube/pki.js";
import { getObj, helloManifest, historyConfigMaps, makeRequest, memoryLogger, pullableImages, scratch, secretsOf } from "./helpers.js";

async function failure(p: Promise<unknown>): Promise<ManentError> {
  return p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => ManentError.from(e),
  );
}

/**
 * What no retry can fix fails at once (a permanent code) with a message that says what to change,
 * classified against the real API server's answers.
 */
describe("kubernetes plugin: errors a retry cannot fix, as the real server gives them", () => {
  let cp: KubeControlPlane;
  let admin: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const params = { "var.REPLICAS": "2" };

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    admin = await cp.clusterAdminAccount("hello");
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  const request = async (extra: { params?: Record<string, string>; text?: string; application?: string } = {}) =>
    makeRequest({
      clusters: [cp],
      access: [admin],
      version: "1.0.0",
      application: extra.application ?? "errs",
      artifactPath: await files.write("m.yaml", extra.text ?? helloManifest),
      params: { ...params, ...extra.params },
    });

  it("an unknown field (spec.replica) is refused in dry-run with the server's message, and permanently", async () => {
    const typo = helloManifest.replace("replicas: ${REPLICAS}", "replica: ${REPLICAS}");
    const err = await failure(d.dryRun(await request({ text: typo })));
    assert.equal(err.code, Code.InvalidArgument);
    assert.ok(err.permanent, "the real server's answer is a 500, yet no retry can fix it");
    assert.match(
      err.message,
      /^cluster 127\.0\.0\.1: Deployment\/hello\/hello: the API server refused a field its schema does not declare \(a typo, or a field of another apiVersion\): .*\.spec\.replica: field not declared in schema/,
    );
    const deployErr = await failure(d.deploy(await request({ text: typo })));
    assert.equal(deployErr.code, Code.InvalidArgument);
    assert.equal(await getObj(cp, "apps/v1", "Deployment", "hello"), undefined);
  });

  it("a namespace that does not exist: permanent, naming it", async () => {
    for (const call of ["dryRun", "deploy"] as const) {
      const err = await failure(d[call](await request({ params: { namespace: "nowhere" } })));
      assert.equal(err.code, Code.FailedPrecondition, call);
      assert.ok(err.permanent);
      assert.match(err.message, /namespace "nowhere" does not exist: create it .* or set param namespace to an existing one/);
    }
  });

  it("a certificate the client cannot verify: permanent, saying to set ca_secret", async () => {
    const noCa = await request();
    delete noCa.params.ca_secret;
    let err = await failure(d.dryRun(noCa));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.match(err.message, /cannot verify the API server's certificate \([A-Z_]+\): set param ca_secret/);

    const wrongCa = await request();
    wrongCa.secrets = secretsOf({ "kube-token": admin.token, "kube-ca": (await generatePki()).caPem });
    err = await failure(d.deploy(wrongCa));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.match(err.message, /cannot verify the API server's certificate \([A-Z_]+\): the CA in ca_secret did not sign it/);
  });

  it("an empty or wrong token: permanent, naming the secret and never showing the token", async () => {
    const empty = await request();
    empty.secrets = secretsOf({ "kube-token": "\n", "kube-ca": cp.caPem });
    let err = await failure(d.deploy(empty));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.match(err.message, /secret "kube-token" \(the service account token\) is empty/);

    const wrong = await request();
    const forged = admin.token.slice(0, -8) + "AAAAAAAA";
    wrong.secrets = secretsOf({ "kube-token": forged, "kube-ca": cp.caPem });
    err = await failure(d.dryRun(wrong));
    assert.equal(err.code, Code.Unauthenticated);
    assert.ok(err.permanent);
    assert.match(err.message, /the API server refused the token in secret "kube-token" \(401 Unauthorized\)/);
    assert.ok(!err.message.includes(forged.slice(0, 20)), "the token never appears in errors");
  });

  it("a secret the envconfig does not declare: permanent, naming the param", async () => {
    const err = await failure(d.deploy(await request({ params: { token_secret: "not-declared" } })));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.ok(err.permanent);
    assert.match(
      err.message,
      /secret "not-declared" \(param token_secret\): secret not-declared is not declared \(declare it under secrets: in the envconfig\)/,
    );
    assert.deepEqual(await historyConfigMaps(cp), []);
  });
});
