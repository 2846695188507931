import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { KubeControlPlane } from "../../support/kube/control-plane.js";
import { KubeRequestError, schemalessCrd, type KubeObj } from "../../support/kube/kube-client.js";
import { toolsBin } from "../../support/kube/processes.js";

/** The harness itself: the real control plane, and the kubelet simulator's part in it. */
describe("test harness: real kube-apiserver, etcd, kube-controller-manager and the kubelet simulator", () => {
  let cp: KubeControlPlane;

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages: ["registry.example/ok:1", /^registry\.example\/also-ok:/] });
  });
  after(() => cp?.stop());

  const deployment = (name: string, image: string, progressDeadlineSeconds = 600): KubeObj => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "harness" },
    spec: {
      replicas: 2,
      progressDeadlineSeconds,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image }] } },
    },
  });

  it("reports the built version, and refuses an unknown token with 401", async () => {
    const v = (await cp.client("").request("GET", "/version")) as { gitVersion: string; major: string; minor: string };
    assert.deepEqual([v.gitVersion, v.major, v.minor], ["v1.34.2", "1", "34"]);
    const err = await cp
      .client("not-a-token")
      .request("GET", "/api/v1/namespaces")
      .then(
        () => assert.fail("accepted"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof KubeRequestError);
    assert.equal(err.status, 401);
  });

  it("the real token controller fills a service account's token Secret, and RBAC limits it to its Role", async () => {
    const access = await cp.serviceAccount("harness");
    assert.equal(access.caPem, cp.caPem);
    const sa = cp.client(access.token);
    await sa.apply(
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: "harness" }, data: { a: "b" } },
      { manager: "t" },
    );
    const err = await sa.request("GET", "/api/v1/namespaces/harness/secrets").then(
      () => assert.fail("listed secrets"),
      (e: unknown) => e as KubeRequestError,
    );
    assert.equal(err.status, 403);
    assert.match(
      err.body.message!,
      /User "system:serviceaccount:harness:manent" cannot list resource "secrets" in API group "" in the namespace "harness"/,
    );
  });

  it("a Deployment of pullable images becomes available through the real controllers", async () => {
    await cp.admin.apply(deployment("good", "registry.example/ok:1"));
    const dep = await cp.admin.waitFor("good available", async () => {
      const d = await cp.get("apps/v1", "Deployment", "harness", "good");
      return (d?.status as { availableReplicas?: number } | undefined)?.availableReplicas === 2 ? d : undefined;
    });
    const conditions = (dep.status as { conditions: { type: string; reason: string }[] }).conditions
      .map((c) => `${c.type}/${c.reason}`)
      .sort();
    assert.deepEqual(conditions, ["Available/MinimumReplicasAvailable", "Progressing/NewReplicaSetAvailable"]);
    const pods = await cp.list("v1", "Pod", "harness", "app=good");
    assert.equal(pods.length, 2);
    for (const p of pods) {
      assert.equal((p.spec as { nodeName: string }).nodeName, cp.kubelet.nodeName);
      assert.equal((p.status as { phase: string }).phase, "Running");
    }
  });

  it("an image that cannot be pulled: ImagePullBackOff, and the real controller's ProgressDeadlineExceeded", async () => {
    await cp.admin.apply(deployment("bad", "registry.example/missing:1", 2));
    const dep = await cp.admin.waitFor("bad past its deadline", async () => {
      const d = await cp.get("apps/v1", "Deployment", "harness", "bad");
      const conds = (d?.status as { conditions?: { type: string; reason: string; message: string }[] } | undefined)?.conditions ?? [];
      return conds.find((c) => c.type === "Progressing" && c.reason === "ProgressDeadlineExceeded");
    });
    assert.match(dep.message, /^ReplicaSet "bad-[a-z0-9]+" has timed out progressing\.$/);
    const pods = await cp.list("v1", "Pod", "harness", "app=bad");
    assert.equal(pods.length, 2);
    const waiting = (pods[0]!.status as { containerStatuses: { state: { waiting?: { reason: string } } }[] }).containerStatuses[0]!.state
      .waiting;
    assert.equal(waiting?.reason, "ImagePullBackOff");
  });

  it("deleting a Deployment: the real garbage collector removes its pods, the simulator confirms their deletion", async () => {
    await cp.admin.delete("apps/v1", "Deployment", "harness", "good");
    await cp.admin.waitFor("pods of good gone", async () =>
      (await cp.list("v1", "Pod", "harness", "app=good")).length === 0 ? true : undefined,
    );
  });

  it("a CRD and its custom resources can be applied (Gateway API style), unknown fields preserved", async () => {
    await cp.installCrds([schemalessCrd("Widget", "widgets")]);
    await cp.admin.apply({
      apiVersion: "example.com/v1",
      kind: "Widget",
      metadata: { name: "w", namespace: "harness" },
      spec: { anything: { goes: [1, 2] } },
    });
    assert.deepEqual((await cp.get("example.com/v1", "Widget", "harness", "w"))!.spec, { anything: { goes: [1, 2] } });
  });

  it("kubectl of the same version (built with the control plane) talks to it", async () => {
    const access = await cp.serviceAccountToken("harness", "manent");
    const ca = join(cp.dir, "kubectl-ca.crt");
    await writeFile(ca, access.caPem);
    const kubectl = (...args: string[]) =>
      promisify(execFile)(`${toolsBin}/kubectl`, [
        `--server=${cp.url}`,
        `--certificate-authority=${ca}`,
        `--token=${access.token}`,
        `--cache-dir=${join(cp.dir, "kubectl-cache")}`,
        ...args,
      ]);
    const version = JSON.parse((await kubectl("version", "-o", "json")).stdout) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    assert.deepEqual([version.clientVersion.gitVersion, version.serverVersion.gitVersion], ["v1.34.2", "v1.34.2"]);
    assert.equal((await kubectl("-n", "harness", "get", "configmap", "x", "-o", "jsonpath={.data.a}")).stdout, "b");
  });

  it("audits what a service account sent", async () => {
    const requests = await cp.auditedRequests();
    assert.ok(
      requests.some(
        (r) =>
          r.user === "system:serviceaccount:harness:manent" &&
          r.verb === "patch" &&
          r.requestURI.startsWith("/api/v1/namespaces/harness/configmaps/x?"),
      ),
    );
    assert.deepEqual(cp.kubelet.errors, []);
  });
});
