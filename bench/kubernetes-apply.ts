/**
 * Wall time of the kubernetes plugin applying a 200-object manifest (50 Deployments, 50 Services,
 * 100 ConfigMaps) and waiting for the rollouts, against the test API server on loopback
 * (test/plugins/kubernetes/api-server; its controller completes a rollout in two 5 ms steps).
 * It measures the plugin's own cost: discovery, 200 server-side applies, history writes, polling.
 * Usage: node --import tsx bench/kubernetes-apply.ts [rounds]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubernetesDeployer } from "../src/plugins/kubernetes/index.js";
import { clusterAdmin, TestApiServer } from "../test/plugins/kubernetes/api-server/index.js";
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
    docs.push(`apiVersion: v1\nkind: Service\nmetadata: {name: app-${i}}\nspec:\n  selector: {app: app-${i}}\n  ports: [{port: 80, targetPort: 8080}]\n`);
    for (const k of ["a", "b"]) docs.push(`apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-${i}-${k}}\ndata: {version: "\${MANENT_VERSION}", key: "${"x".repeat(200)}"}\n`);
  }
  return docs.join("---\n");
}

const rounds = Number(process.argv[2] ?? 3);
const api = await TestApiServer.start({ tokens: { "tok-manent": { user: "admin", rules: clusterAdmin } }, namespaces: ["hello"] });
const dir = await mkdtemp(join(tmpdir(), "manent-bench-k8s-"));
const path = join(dir, "bench.yaml");
await writeFile(path, manifest(200));
const d = new KubernetesDeployer(memoryLogger());
try {
  const dryReq = makeRequest({ clusters: [api], application: "bench", version: "0.0.0", artifactPath: path });
  let t = performance.now();
  const dry = await d.dryRun(dryReq);
  console.log(`dry-run 200 objects: ${(performance.now() - t).toFixed(0)} ms (objects_checked ${dry.targets[0]!.details?.objects_checked})`);
  for (let r = 1; r <= rounds; r++) {
    const req = makeRequest({ clusters: [api], application: "bench", version: `1.0.${r}`, artifactPath: path, params: { wait_timeout: "2m" } });
    const before = api.requests.length;
    t = performance.now();
    const res = await d.deploy(req);
    const ms = performance.now() - t;
    console.log(
      `deploy ${r === 1 ? "(create)" : "(update)"} 200 objects + wait for 50 rollouts: ${ms.toFixed(0)} ms, ${api.requests.length - before} API requests, status ${res.targets[0]!.status}`,
    );
  }
} finally {
  await api.close();
  await rm(dir, { recursive: true, force: true });
}
