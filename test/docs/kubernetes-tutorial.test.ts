import { existsSync } from "node:fs";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KubeControlPlane } from "../support/kube/control-plane.js";
import { repoRoot } from "../support/server-process.js";
import { vaultBinary } from "../support/vault.js";
import { baseSetup, portLock, testPage, type PageSetup } from "./page-test.js";

/**
 * docs/tutorials/kubernetes.md against a real control plane (kube-apiserver, controller manager,
 * etcd; a simulated kubelet runs pods whose image is allowed).
 */
testPage("docs/tutorials/kubernetes.md", async (defer) => {
  const base = await baseSetup();
  const cp = await KubeControlPlane.start({ pullableImages: ["hashicorp/http-echo:1.0"] });
  defer(() => cp.stop());
  return readerCluster(base, cp);
});

/** The reader administers the cluster: kubectl gets a cluster-admin token in ~/.kube/config, where it looks by default. */
async function readerCluster(base: PageSetup, cp: KubeControlPlane): Promise<PageSetup> {
  const admin = await cp.clusterAdminAccount("kube-system", "tutorial-reader");
  await mkdir(join(base.home, ".kube"), { recursive: true });
  await writeFile(
    join(base.home, ".kube/config"),
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "test", cluster: { server: cp.url, "certificate-authority-data": Buffer.from(cp.caPem).toString("base64") } }],
      users: [{ name: "admin", user: { token: admin.token } }],
      contexts: [{ name: "test", context: { cluster: "test", user: "admin" } }],
      "current-context": "test",
    }),
    { mode: 0o600 },
  );
  // kubectl built with the control plane when there is one, else the machine's.
  const tools = join(repoRoot, ".tools/bin");
  const path = existsSync(join(tools, "kubectl")) ? `${tools}:${base.env.PATH}` : base.env.PATH;
  return { ...base, env: { ...base.env, PATH: path } };
}

// docs/operations/secret-stores.md's k8s: references against the same kind of control plane: the
// reader creates the Secret, the service account and its token with kubectl, as an administrator.
// Its vault: references against the reader's own Vault dev server, which the page starts on Vault's
// default port (8200, under its lock as 8080 is): `vault` (built by scripts/ci/vault.sh) is linked
// into a bin directory first on PATH, as installing HashiCorp's binary in /usr/local/bin would.
testPage("docs/operations/secret-stores.md", async (defer) => {
  // Looked for first: a machine without Vault fails the page without starting a control plane.
  const vault = vaultBinary();
  const cp = await KubeControlPlane.start();
  defer(() => cp.stop());
  const base = await readerCluster(await baseSetup(), cp);
  const local = join(base.home, "..", "local-bin");
  await mkdir(local, { recursive: true });
  await symlink(vault, join(local, "vault"));
  return { ...base, env: { ...base.env, PATH: `${local}:${base.env.PATH}` }, wrapper: [...portLock(8200), ...(base.wrapper ?? [])] };
});
