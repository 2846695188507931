/**
 * Wall time of the kubernetes plugin applying a 200-object manifest (50 Deployments, 50 Services,
 * 100 ConfigMaps) and waiting for the rollouts, against a real kube-apiserver + etcd +
 * kube-controller-manager on loopback (test/support/kube; the kubelet simulator makes pods ready
 * at once). It measures discovery, 200 server-side applies, history writes and polling, plus the
 * real controllers' time to roll out 100 pods. Needs scripts/ci/kube-control-plane.sh's binaries.
 * Usage: node --import tsx bench/kubernetes-apply.ts [rounds]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubernetesDeployer } from "../src/plugins/kubernetes/index.js";
import { KubeControlPlane } from "../test/support/kube/control-plane.js";
import { makeRequest, memoryLogger } from "../test/plugins/kubernetes/helpers.js";

function manifest(n: number): string {
  const docs: string[] = [];
  for (let i = 0; i < n / 4; i++) {
    docs.push(`apiVersion: apps/v1
kind: Deployment
metadata: {name: app-${i}}
spec:
  replicas: 2
  selector: {matchLabels: {app: app-${i}}}
  template:
    metadata: {labels: {app: app-${i}}}
    spec:
      containers: [{name: app, image: "registry.example.com/app:\${MANENT_VERSION}", env: [{name: N, value: "${i}"}]}]
`);
    docs.push(
      `apiVersion: v1\nkind: Service\nmetadata: {name: app-${i}}\nspec:\n  selector: {app: app-${i}}\n  ports: [{port: 80, targetPort: 8080}]\n`,
    );
    for (const k of ["a", "b"])
      docs.push(
        `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-${i}-${k}}\ndata: {version: "\${MANENT_VERSION}", key: "${"x".repeat(200)}"}\n`,
      );
  }
  return docs.join("---\n");
}

const rounds = Number(process.argv[2] ?? 3);
const cp = await KubeControlPlane.start({ pullableImages: [/^registry\.example\.com\/app:/] });
console.log(
  `control plane ready in ${cp.timings.total} ms (etcd ${cp.timings.etcd}, kube-apiserver ${cp.timings.apiserver}, kube-controller-manager ${cp.timings.controllerManager})`,
);
const access = await cp.clusterAdminAccount("hello");
const dir = await mkdtemp(join(tmpdir(), "manent-bench-k8s-"));
const path = join(dir, "bench.yaml");
await writeFile(path, manifest(200));
const d = new KubernetesDeployer(memoryLogger());
try {
  const dryReq = makeRequest({ clusters: [cp], access: [access], application: "bench", version: "0.0.0", artifactPath: path });
  let t = performance.now();
  const dry = await d.dryRun(dryReq);
  console.log(
    `dry-run 200 objects: ${(performance.now() - t).toFixed(0)} ms (objects_checked ${dry.targets[0]!.details?.objects_checked})`,
  );
  for (let r = 1; r <= rounds; r++) {
    const req = makeRequest({
      clusters: [cp],
      access: [access],
      application: "bench",
      version: `1.0.${r}`,
      artifactPath: path,
      params: { wait_timeout: "2m" },
    });
    const before = (await cp.auditedRequests()).length;
    t = performance.now();
    const res = await d.deploy(req);
    const ms = performance.now() - t;
    const requests = (await cp.auditedRequests()).length - before;
    console.log(
      `deploy ${r === 1 ? "(create)" : "(update)"} 200 objects + wait for 50 rollouts: ${ms.toFixed(0)} ms, ${requests} API requests, status ${res.targets[0]!.status}`,
    );
  }
} finally {
  await cp.stop();
  await rm(dir, { recursive: true, force: true });
}
