import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { Code, isPermanent, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { schemalessCrd } from "../../support/kube/kube-client.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import {
  getObj,
  helloManifest,
  makeRequest as makeRequestOn,
  memoryLogger,
  pullableImages,
  scratch,
  type RequestInput,
} from "./helpers.js";
import { findHelm } from "./find-helm.js";

const digest = "sha256:" + "a".repeat(64);

async function rejection(p: Promise<unknown>): Promise<ManentError> {
  return p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => ManentError.from(e),
  );
}

describe("kubernetes plugin: manifest policies", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const makeRequest = (input: Omit<RequestInput, "clusters" | "access">) => makeRequestOn({ ...input, clusters: [cp], access: [access] });

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.clusterAdminAccount("hello");
    await cp.namespace("other");
    files = await scratch();
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  it("require_image_digest refuses tags, in containers and init containers of every pod-template kind", async () => {
    const job = `apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          initContainers: [{name: init, image: "busybox:1.36"}]
          containers: [{name: run, image: "busybox@${digest}"}]
          restartPolicy: Never
`;
    const path = await files.write("tags.yaml", `${helloManifest}---\n${job}`);
    const req = makeRequest({ artifactPath: path, version: "1.0.0", params: { "var.REPLICAS": "1", require_image_digest: "true" } });
    const err = await rejection(d.validate(req));
    assert.equal(err.code, Code.InvalidArgument);
    // Each refused image by file, object and field.
    assert.match(err.message, /tags\.yaml: Deployment\/hello: spec\.template\.spec\.containers\[0\]\.image "hashicorp\/http-echo:1\.0"/);
    assert.match(
      err.message,
      /tags\.yaml: CronJob\/nightly: spec\.jobTemplate\.spec\.template\.spec\.initContainers\[0\]\.image "busybox:1\.36"/,
    );
    assert.doesNotMatch(err.message, /busybox@/);
    // deploy refuses too, before touching the cluster
    const before = (await cp.auditedRequests()).length;
    const deployErr = await rejection(d.deploy(req));
    assert.ok(isPermanent(deployErr));
    assert.deepEqual(
      (await cp.auditedRequests()).slice(before).filter((r) => r.verb === "patch"),
      [],
    );

    const pinned = await files.write("pinned.yaml", helloManifest.replace("hashicorp/http-echo:1.0", `hashicorp/http-echo@${digest}`));
    await d.validate(
      makeRequest({ artifactPath: pinned, version: "1.0.0", params: { "var.REPLICAS": "1", require_image_digest: "true" } }),
    );
    // without the param, tags are fine
    await d.validate(makeRequest({ artifactPath: path, version: "1.0.0", params: { "var.REPLICAS": "1" } }));
  });

  it("an object naming another namespace is refused; objects without one go to params.namespace", async () => {
    const stray = await files.write("stray.yaml", `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: other}\ndata: {k: v}\n`);
    const err = await rejection(d.deploy(makeRequest({ artifactPath: stray, version: "1.0.0" })));
    assert.ok(isPermanent(err));
    assert.match(err.message, /ConfigMap\/other\/a: names a namespace other than "hello"/);
    assert.equal(await getObj(cp, "v1", "ConfigMap", "a", "other"), undefined);

    const ok = await files.write(
      "ok.yaml",
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: hello}\ndata: {k: v}\n`,
    );
    await d.deploy(makeRequest({ artifactPath: ok, version: "1.0.0", application: "ns" }));
    assert.ok(await getObj(cp, "v1", "ConfigMap", "a"));
    assert.ok(await getObj(cp, "v1", "ConfigMap", "b"));
  });

  it("an unknown variable is a permanent error naming it and the param to set", async () => {
    const path = await files.write("vars.yaml", helloManifest);
    const err = await rejection(d.validate(makeRequest({ artifactPath: path, version: "1.0.0" })));
    assert.equal(err.code, Code.InvalidArgument);
    assert.ok(isPermanent(err));
    assert.match(err.message, /unknown variable \$\{REPLICAS\} \(set it with param var\.REPLICAS\)/);
    // $${X} stays literal and needs no variable
    const escaped = await files.write(
      "escaped.yaml",
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: esc}\ndata: {script: "echo $\${HOME}"}\n`,
    );
    await d.deploy(makeRequest({ artifactPath: escaped, version: "1.0.0", application: "esc" }));
    assert.deepEqual((await getObj(cp, "v1", "ConfigMap", "esc"))!.data, { script: "echo ${HOME}" });
  });

  it("bad params are refused with the param's name", async () => {
    const path = await files.write("p.yaml", helloManifest);
    for (const [params, field] of [
      [{ wait_timeout: "soon" }, "wait_timeout"],
      [{ namespace: "Not_A_Label" }, "namespace"],
      [{ history_limit: "0" }, "history_limit"],
      [{ helm_values: "- a list" }, "helm_values"],
      [{ colour: "blue" }, "colour"],
    ] as [Record<string, string>, string][]) {
      const err = await rejection(
        d.validate(makeRequest({ artifactPath: path, version: "1.0.0", params: { "var.REPLICAS": "1", ...params } })),
      );
      assert.equal(err.code, Code.InvalidArgument);
      assert.ok(err.message.includes(field), err.message);
    }
  });

  it("images() lists a chart's images as rendered for each cluster; a deploy applies none outside verifiedImages", async () => {
    const helm = findHelm();
    assert.ok(helm, "helm is in .tools/bin (scripts/ci/kubernetes.sh)");
    const saved = process.env.MANENT_HELM;
    process.env.MANENT_HELM = helm;
    try {
      const signed = `registry.example:5000/acme/shop@sha256:${"b".repeat(64)}`;
      const other = `registry.example:5000/acme/shop-next@sha256:${"c".repeat(64)}`;
      // The chart picks its image by what the cluster serves, as charts do with .Capabilities.
      const chart = join(files.dir, "gadget-chart", "gadget");
      await mkdir(join(chart, "templates"), { recursive: true });
      await writeFile(join(chart, "Chart.yaml"), "apiVersion: v2\nname: gadget\nversion: 0.1.0\n");
      await writeFile(
        join(chart, "templates", "deployment.yaml"),
        `apiVersion: apps/v1
kind: Deployment
metadata: {name: gadget}
spec:
  selector: {matchLabels: {app: gadget}}
  template:
    metadata: {labels: {app: gadget}}
    spec:
      containers:
        - name: gadget
          image: {{ if .Capabilities.APIVersions.Has "example.com/v1/Gadget" }}"${other}"{{ else }}"${signed}"{{ end }}
`,
      );
      await promisify(execFile)(helm, ["package", chart, "-d", files.dir]);
      const req = makeRequest({ artifactPath: join(files.dir, "gadget-0.1.0.tgz"), version: "1.0.0", artifactName: "gadget" });

      const images = await d.images(req);
      assert.deepEqual(images, [
        {
          image: signed,
          file: `chart gadget for cluster ${cp.host}`,
          field: "Deployment/gadget: spec.template.spec.containers[0].image",
        },
      ]);
      await d.deploy({ ...req, verifiedImages: [signed] });
      assert.equal((await getObj(cp, "apps/v1", "Deployment", "gadget"))!.spec.template.spec.containers[0].image, signed);

      // The cluster now serves the kind: the same chart renders another image, never verified.
      await cp.installCrds([schemalessCrd("Gadget", "gadgets")]);
      const err = await rejection(
        d.deploy({
          ...makeRequest({ artifactPath: req.artifact.path!, version: "1.0.1", artifactName: "gadget" }),
          verifiedImages: [signed],
        }),
      );
      assert.equal(err.code, Code.PermissionDenied);
      assert.ok(isPermanent(err));
      assert.equal(
        err.message,
        `kubernetes: cluster ${cp.host}: image "${other}" (chart gadget: Deployment/gadget: spec.template.spec.containers[0].image) was not among the images verified before the deploy began (${signed}): ` +
          "the artifact rendered for this cluster now runs an image whose signature was never checked; deploy again to verify it",
      );
      // Refused before anything changed: the release in service still runs the verified image.
      assert.equal((await getObj(cp, "apps/v1", "Deployment", "gadget"))!.spec.template.spec.containers[0].image, signed);
    } finally {
      if (saved === undefined) delete process.env.MANENT_HELM;
      else process.env.MANENT_HELM = saved;
    }
  });
});
