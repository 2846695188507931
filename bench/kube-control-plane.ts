/**
 * How long the tests' real Kubernetes control plane takes to start and stop (etcd, kube-apiserver,
 * kube-controller-manager ready to fill a service-account token Secret, the kubelet simulator's
 * node registered), and a first Deployment to become available. Figures depend on the machine's
 * load: the same machine shared by other work shows several times these numbers.
 * Usage: node --import tsx bench/kube-control-plane.ts [rounds]
 */
import { KubeControlPlane } from "../test/support/kube/control-plane.js";
import { watchMachine } from "./support/machine-share.js";

const rounds = Number(process.argv[2] ?? 3);
const machine = watchMachine();
for (let r = 1; r <= rounds; r++) {
  const cp = await KubeControlPlane.start({ pullableImages: ["registry.example/app:1"] });
  try {
    let t = performance.now();
    const access = await cp.serviceAccount("bench");
    const tokenMs = performance.now() - t;
    t = performance.now();
    await cp.admin.apply({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "app", namespace: "bench" },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: "app" } },
        template: { metadata: { labels: { app: "app" } }, spec: { containers: [{ name: "app", image: "registry.example/app:1" }] } },
      },
    });
    await cp.admin.waitFor("available", async () =>
      ((await cp.get("apps/v1", "Deployment", "bench", "app"))?.status as { availableReplicas?: number } | undefined)?.availableReplicas ===
      2
        ? true
        : undefined,
    );
    const rolloutMs = performance.now() - t;
    const { etcd, apiserver, controllerManager, total } = cp.timings;
    console.log(
      `round ${r}: ready in ${total} ms (etcd ${etcd}, kube-apiserver ${apiserver}, kube-controller-manager ${controllerManager}); service account + token Secret ${tokenMs.toFixed(0)} ms; 2-replica Deployment available ${rolloutMs.toFixed(0)} ms${access.token ? "" : " (no token!)"}`,
    );
  } finally {
    const t = performance.now();
    await cp.stop();
    console.log(`round ${r}: stopped in ${(performance.now() - t).toFixed(0)} ms`);
  }
}
machine.report();
