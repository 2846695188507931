import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { c as tarCreate } from "tar";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type ClusterAccess } from "../../support/kube/control-plane.js";
import { findHelm } from "./find-helm.js";
import {
  getObj,
  helloManifest,
  makeRequest as makeRequestOn,
  memoryLogger,
  pullableImages,
  scratch,
  type RequestInput,
} from "./helpers.js";

const run = promisify(execFile);
const helm = findHelm();

/** A chart with values files, a Capabilities check, an optional Ingress, a hook, and a CRD with a resource of it. */
const chart: Record<string, string> = {
  "Chart.yaml": "apiVersion: v2\nname: shop\nversion: 0.1.0\nappVersion: 1.0.0\n",
  "values.yaml": 'replicaCount: 1\nmessage: default\ningress:\n  enabled: false\n  host: ""\n',
  "values-prod.yaml": "message: from-prod-values\n",
  "crds/widgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`,
  "templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app.kubernetes.io/managed-by: {{ .Release.Service }}}
spec:
  replicas: {{ .Values.replicaCount }}
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers: [{name: shop, image: "nginx:1.27"}]
`,
  "templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-settings}
data:
  message: {{ .Values.message | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  apps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
  deployments: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
  gadgets: {{ .Capabilities.APIVersions.Has "example.com/v1/Gadget" | quote }}
`,
  "templates/ingress.yaml": `{{- if .Values.ingress.enabled }}
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: {{ .Release.Name }}}
spec:
  rules:
    - host: {{ .Values.ingress.host }}
{{- end }}
`,
  "templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations: {"helm.sh/hook": pre-install}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: "busybox:1.36"}]
`,
  "templates/widget.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: default-widget}\nspec: {size: 3}\n",
};

describe("kubernetes plugin: artifacts", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const savedHelm = process.env.MANENT_HELM;
  const makeRequest = (input: Omit<RequestInput, "clusters" | "access">) => makeRequestOn({ ...input, clusters: [cp], access: [access] });

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    access = await cp.clusterAdminAccount("hello");
    files = await scratch();
  });
  after(async () => {
    if (savedHelm === undefined) delete process.env.MANENT_HELM;
    else process.env.MANENT_HELM = savedHelm;
    await cp?.stop();
    await files?.cleanup();
  });

  it("deploys a .tar.gz of manifests (YAML files in path order, others ignored)", async () => {
    const dir = join(files.dir, "bundle");
    await mkdir(join(dir, "manifests"), { recursive: true });
    const [deploy, service] = helloManifest.split("---\n");
    await writeFile(join(dir, "manifests", "01-deploy.yaml"), deploy!);
    await writeFile(join(dir, "manifests", "02-service.yml"), service!);
    await writeFile(join(dir, "manifests", "README.md"), "not a manifest: ${NOPE}\n");
    const archive = join(files.dir, "hello-2.0.0.tar.gz");
    await tarCreate({ gzip: true, file: archive, cwd: dir }, ["manifests"]);

    const res = await d.deploy(
      makeRequest({ application: "tgz", version: "2.0.0", artifactPath: archive, params: { "var.REPLICAS": "3" } }),
    );
    assert.equal(res.targets[0]!.details?.objects_applied, "2");
    assert.equal((await getObj(cp, "apps/v1", "Deployment", "hello"))!.spec.replicas, 3);
    assert.ok(await getObj(cp, "v1", "Service", "hello"));
  });

  it(
    "a chart needs helm: a clear error when it is missing, only for charts",
    { skip: helm ? false : "helm not built (scripts/ci/kubernetes.sh)" },
    async () => {
      const tgz = await packageChart();
      process.env.MANENT_HELM = join(files.dir, "no-such-helm");
      try {
        const err = await d.deploy(makeRequest({ application: "nohelm", version: "0.1.0", artifactPath: tgz })).then(
          () => assert.fail("deployed a chart without helm"),
          (e: unknown) => ManentError.from(e),
        );
        assert.equal(err.code, Code.FailedPrecondition);
        assert.match(err.message, /the artifact is a Helm chart and the helm binary was not found .*MANENT_HELM/);
        // plain manifests do not need helm
        const plain = await files.write("plain.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {a: b}\n");
        await d.deploy(makeRequest({ application: "nohelm", version: "0.1.0", artifactPath: plain }));
      } finally {
        process.env.MANENT_HELM = helm;
      }
    },
  );

  it(
    "renders a Helm chart with the cluster's capabilities, values files, helm_value and inline values; skips hooks; CRDs first",
    { skip: helm ? false : "helm not built (scripts/ci/kubernetes.sh)" },
    async () => {
      process.env.MANENT_HELM = helm;
      const tgz = await packageChart();
      const params = {
        helm_values_files: "values-prod.yaml",
        "helm_value.replicaCount": "4",
        helm_values: "ingress:\n  enabled: true\n  host: shop.example.com\n",
      };
      const req = makeRequest({ application: "shop", artifactName: "shop", version: "0.1.0", artifactPath: tgz, params });

      // Before the CRD exists the cluster cannot check a Widget: the dry-run skips it.
      const dry = await d.dryRun(req);
      assert.deepEqual(dry.targets[0]!.details, {
        cluster_version: "v1.34.2",
        namespace: "hello",
        objects_checked: "4",
        objects_skipped: "2",
      });

      const before = (await cp.auditedRequests()).length;
      const res = await d.deploy(req);
      assert.equal(res.targets[0]!.details?.objects_skipped, "1", "the hook");
      const settings = (await getObj(cp, "v1", "ConfigMap", "shop-settings"))!;
      assert.deepEqual(settings.data, {
        message: "from-prod-values",
        kube: "v1.34.2",
        apps: "true",
        deployments: "true",
        gadgets: "false",
      });
      const dep = (await getObj(cp, "apps/v1", "Deployment", "shop"))!;
      assert.equal(dep.spec.replicas, 4);
      assert.equal(dep.status.availableReplicas, 4);
      assert.equal(dep.metadata.labels!["app.kubernetes.io/managed-by"], "manent");
      assert.equal((await getObj(cp, "networking.k8s.io/v1", "Ingress", "shop"))!.spec.rules[0].host, "shop.example.com");
      assert.equal(await getObj(cp, "batch/v1", "Job", "shop-migrate"), undefined, "hooks are skipped");
      const crd = (await getObj(cp, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com", undefined))!;
      assert.equal(
        crd.spec.versions[0].schema.openAPIV3Schema["x-kubernetes-preserve-unknown-fields"],
        true,
        "CRD fields survive the apply unchanged",
      );
      assert.deepEqual((await getObj(cp, "example.com/v1", "Widget", "default-widget"))!.spec, { size: 3 });
      const applies = (await cp.auditedRequests()).slice(before).filter((r) => r.verb === "patch" && !r.requestURI.includes("dryRun"));
      const crdPatch = applies.findIndex((r) => r.requestURI.includes("/customresourcedefinitions/"));
      const widgetPatch = applies.findIndex((r) => r.requestURI.includes("/widgets/"));
      assert.ok(crdPatch >= 0 && widgetPatch > crdPatch, "the CRD is applied before its resources");

      // With helm_include_hooks the hook Job is applied too (and the real Job controller runs it).
      await d.deploy(
        makeRequest({
          application: "shop",
          artifactName: "shop",
          version: "0.1.1",
          artifactPath: tgz,
          params: { ...params, helm_include_hooks: "true" },
        }),
      );
      assert.ok(await getObj(cp, "batch/v1", "Job", "shop-migrate"));
    },
  );

  it(
    "adopts the objects of an existing Helm release by forcing the apply",
    { skip: helm ? false : "helm not built (scripts/ci/kubernetes.sh)" },
    async () => {
      process.env.MANENT_HELM = helm;
      const tgz = await packageChart();
      // What `helm install` left: a Deployment created by the "helm" field manager (replicas 1).
      await cp.admin.request("POST", "/apis/apps/v1/namespaces/hello/deployments", {
        query: { fieldManager: "helm" },
        body: {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: {
            name: "legacy",
            annotations: { "meta.helm.sh/release-name": "legacy", "meta.helm.sh/release-namespace": "hello" },
            labels: { "app.kubernetes.io/managed-by": "Helm" },
          },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: "shop" } },
            template: { metadata: { labels: { app: "shop" } }, spec: { containers: [{ name: "shop", image: "nginx:1.26" }] } },
          },
        },
      });
      await d.deploy(
        makeRequest({
          application: "legacy",
          artifactName: "legacy",
          version: "0.1.0",
          artifactPath: tgz,
          params: { "helm_value.replicaCount": "2" },
        }),
      );
      const dep = (await getObj(cp, "apps/v1", "Deployment", "legacy"))!;
      assert.equal(dep.spec.replicas, 2);
      assert.equal(dep.metadata.labels!["app.kubernetes.io/managed-by"], "manent");
      const managers = dep.metadata.managedFields!;
      const manent = managers.find((m) => m.manager === "manent")!;
      assert.ok(JSON.stringify(manent.fieldsV1).includes('"f:replicas"'));
      assert.ok(
        !JSON.stringify(managers.find((m) => m.manager === "helm")?.fieldsV1 ?? {}).includes('"f:replicas"'),
        "helm no longer owns replicas",
      );
    },
  );

  async function packageChart(): Promise<string> {
    const dir = join(files.dir, "chart-src", "shop");
    for (const [name, text] of Object.entries(chart)) {
      await mkdir(join(dir, name, ".."), { recursive: true });
      await writeFile(join(dir, name), text);
    }
    const out = join(files.dir, "charts");
    await mkdir(out, { recursive: true });
    await run(helm!, ["package", dir, "-d", out]);
    return join(out, "shop-0.1.0.tgz");
  }
});
