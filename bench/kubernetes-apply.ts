/**
 * Wall time of the kubernetes plugin applying a 200-object manifest (50 Deployments, 50 Services,
 * 100 ConfigMaps) and waiting for the rollouts, against a real kube-apiserver + etcd +
 * kube-controller-manager on loopback (test/support/kube; the kubelet simulator makes pods ready
 * at once), side by side with `kubectl apply --server-side` + `kubectl rollout status` of the same
 * objects in another namespace of the same cluster (alternating: manent, kubectl, manent, …).
 * It also says what each manent deploy was made of, from the API server's audit log: requests per
 * kind (dry-run applies, applies, history ConfigMaps, rollout polls) and when each phase ended.
 * Needs scripts/ci/kube-control-plane.sh's binaries (kubectl included).
 * Usage: node --import tsx bench/kubernetes-apply.ts [rounds] [--json]
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { KubernetesDeployer } from "../src/plugins/kubernetes/index.js";
import { KubeControlPlane, type AuditedRequest } from "../test/support/kube/control-plane.js";
import { makeRequest, memoryLogger } from "../test/plugins/kubernetes/helpers.js";
import { watchMachine } from "./support/machine-share.js";

const run = promisify(execFile);
const kubectl = resolve(import.meta.dirname, "../.tools/bin/kubectl");

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
      containers: [{name: app, image: "registry.example.com/app:\${MANENT_VERSION}", env: [{name: "N", value: "${i}"}]}]
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

const args = process.argv.slice(2);
const json = args.includes("--json");
const rounds = Number(args.find((a) => !a.startsWith("--")) ?? 3);
const load = (): string => loadavg()[0]!.toFixed(1);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
const micros = (ts: string): number => Date.parse(ts);

/** What one manent deploy sent, by kind of request, and when (ms after its start) each kind's last answer came. */
function breakdown(reqs: AuditedRequest[], start: number): Record<string, { requests: number; last_ms: number }> {
  const out: Record<string, { requests: number; last_ms: number }> = {};
  for (const r of reqs) {
    const uri = r.requestURI;
    const kind =
      r.verb === "patch" && uri.includes("dryRun=All")
        ? "dry_run_apply"
        : /\/configmaps\/manent-/.test(uri) || (r.verb === "list" && uri.includes("/configmaps"))
          ? "history"
          : r.verb === "patch" || r.verb === "update"
            ? "apply"
            : r.verb === "get" && /\/(deployments|statefulsets|daemonsets)\//.test(uri)
              ? "rollout_poll"
              : r.verb === "watch" || uri.includes("watch=")
                ? "rollout_watch"
                : `other_${r.verb}`;
    const e = (out[kind] ??= { requests: 0, last_ms: 0 });
    e.requests++;
    e.last_ms = Math.max(e.last_ms, Math.round(micros(r.completed) - start));
  }
  return out;
}

const cp = await KubeControlPlane.start({ pullableImages: [/^registry\.example\.com\/app:/] });
console.log(
  `control plane ready in ${cp.timings.total} ms (etcd ${cp.timings.etcd}, kube-apiserver ${cp.timings.apiserver}, kube-controller-manager ${cp.timings.controllerManager}); load average ${load()}`,
);
const access = await cp.clusterAdminAccount("hello");
await cp.namespace("bench-kubectl");
const dir = await mkdtemp(join(tmpdir(), "manent-bench-k8s-"));
const path = join(dir, "bench.yaml");
const text = manifest(200);
await writeFile(path, text);
const kubeconfig = join(dir, "kubeconfig");
await writeFile(
  kubeconfig,
  JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "bench",
        cluster: { server: `https://${cp.host}:${cp.port}`, "certificate-authority-data": Buffer.from(access.caPem).toString("base64") },
      },
    ],
    users: [{ name: "bench", user: { token: access.token } }],
    contexts: [{ name: "bench", context: { cluster: "bench", user: "bench", namespace: "bench-kubectl" } }],
    "current-context": "bench",
  }),
);
const deployments = Array.from({ length: 50 }, (_, i) => `deployment/app-${i}`);
const d = new KubernetesDeployer(memoryLogger());
const figures: Record<string, unknown> = { bench: "kubernetes-apply", objects: 200, rounds };
const manentUpdates: number[] = [];
const kubectlUpdates: number[] = [];
const machine = watchMachine();
try {
  const dryReq = makeRequest({ clusters: [cp], access: [access], application: "bench", version: "0.0.0", artifactPath: path });
  let t = performance.now();
  const dry = await d.dryRun(dryReq);
  figures.dry_run_ms = Math.round(performance.now() - t);
  console.log(
    `dry-run 200 objects: ${figures.dry_run_ms as number} ms (objects_checked ${dry.targets[0]!.details?.objects_checked}); load ${load()}`,
  );
  for (let r = 1; r <= rounds; r++) {
    const version = `1.0.${r}`;
    const what = r === 1 ? "create" : "update";
    const req = makeRequest({
      clusters: [cp],
      access: [access],
      application: "bench",
      version,
      artifactPath: path,
      params: { wait_timeout: "2m" },
    });
    const before = (await cp.auditedRequests()).length;
    const wallStart = Date.now();
    t = performance.now();
    const res = await d.deploy(req);
    const ms = Math.round(performance.now() - t);
    const sent = (await cp.auditedRequests()).slice(before).filter((a) => a.user.includes(":hello:"));
    console.log(
      `manent deploy (${what}) 200 objects + wait for 50 rollouts: ${ms} ms, ${sent.length} API requests, status ${res.targets[0]!.status}; load ${load()}`,
    );
    const parts = breakdown(sent, wallStart);
    console.log(
      `  made of: ${Object.entries(parts)
        .map(([k, v]) => `${k} ${v.requests} (last at ${v.last_ms} ms)`)
        .join(", ")}`,
    );
    // The same objects, the same version, through kubectl in its own namespace.
    await writeFile(join(dir, "kubectl.yaml"), text.replaceAll("${MANENT_VERSION}", version));
    t = performance.now();
    await run(
      kubectl,
      ["--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager", "bench", "-f", join(dir, "kubectl.yaml")],
      {
        maxBuffer: 1 << 24,
      },
    );
    const applied = Math.round(performance.now() - t);
    await run(kubectl, ["--kubeconfig", kubeconfig, "rollout", "status", "--timeout", "2m", ...deployments], { maxBuffer: 1 << 24 });
    const kms = Math.round(performance.now() - t);
    console.log(
      `kubectl apply --server-side (${what}) + rollout status of the 50 Deployments: ${kms} ms (apply alone ${applied} ms); load ${load()}`,
    );
    if (r === 1) {
      figures.create_ms = ms;
      figures.kubectl_create_ms = kms;
    } else {
      manentUpdates.push(ms);
      kubectlUpdates.push(kms);
    }
    figures[`round_${r}`] = {
      manent_ms: ms,
      kubectl_ms: kms,
      kubectl_apply_ms: applied,
      requests: sent.length,
      breakdown: parts,
      load: load(),
    };
  }
  if (manentUpdates.length > 0) {
    figures.update_ms_p50 = median(manentUpdates);
    figures.kubectl_update_ms_p50 = median(kubectlUpdates);
    figures.update_ratio = Math.round((median(manentUpdates) / median(kubectlUpdates)) * 100) / 100;
    console.log(
      `update, median of ${manentUpdates.length}: manent ${figures.update_ms_p50 as number} ms, kubectl ${figures.kubectl_update_ms_p50 as number} ms: ${figures.update_ratio as number}×`,
    );
  }
} finally {
  await cp.stop();
  await rm(dir, { recursive: true, force: true });
}
const share = machine.report();
if (json) console.log(JSON.stringify({ ...figures, ...share }));
