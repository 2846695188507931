import { z } from "zod";
import { formatSecretRef, secretRefSchema, type SecretRef } from "./secret-ref.js";

/** A key of a Vault KV v2 secret at `mount`/`path`: `vault:mount/path#key`. */
export interface VaultSecretRef {
  kind: "vault";
  /** The KV v2 engine's mount (the reference's first segment). */
  mount: string;
  /** The secret's path under the mount, segments joined by "/". */
  path: string;
  key: string;
}

/** A key of a Kubernetes Secret: `k8s:namespace/name#key`. */
export interface KubeSecretRef {
  kind: "k8s";
  namespace: string;
  name: string;
  key: string;
}

/** A secret kept in an external store that manent.yml configures (`secret_stores`). */
export type StoreSecretRef = VaultSecretRef | KubeSecretRef;

/** What an envconfig's `secrets[].ref` may be: a local reference or a store's. */
export type DeploySecretRef = SecretRef | StoreSecretRef;

// Segments are plain names: no "..", no empty segment, nothing a URL would reinterpret.
const segment = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const vaultKey = /^[A-Za-z0-9._-]{1,256}$/;
// Kubernetes names: a namespace is a DNS-1123 label, a Secret's name a DNS-1123 subdomain, a key a ConfigMap key.
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const kubeKey = /^[-._A-Za-z0-9]{1,253}$/;

const vaultForm = 'must be "vault:mount/path#key" (the KV v2 mount, then the secret\'s path, segments of letters, digits, ".", "_", "-")';
const kubeForm = 'must be "k8s:namespace/name#key" (a Kubernetes namespace, a Secret\'s name and one of its keys)';

/** Parses a store reference, or says why it is not one (undefined: not a store reference at all). */
export function parseStoreSecretRef(ref: string): { ref: StoreSecretRef } | { error: string } | undefined {
  if (ref.startsWith("vault:")) {
    const hash = ref.indexOf("#");
    if (hash < 0) return { error: `${vaultForm}: the #key is missing` };
    const [mount, ...rest] = ref.slice(6, hash).split("/");
    const key = ref.slice(hash + 1);
    if (!mount || rest.length === 0) return { error: `${vaultForm}: a mount and a path are needed` };
    const bad = [mount, ...rest].find((s) => !segment.test(s) || s === "." || s === "..");
    if (bad !== undefined) return { error: `${vaultForm}: path segment ${JSON.stringify(bad.slice(0, 64))} is not allowed` };
    if (!vaultKey.test(key)) return { error: `${vaultForm}: the key after "#" is empty or has other characters` };
    return { ref: { kind: "vault", mount, path: rest.join("/"), key } };
  }
  if (ref.startsWith("k8s:")) {
    const m = /^k8s:([^/#]*)\/([^/#]*)#(.*)$/s.exec(ref);
    if (!m) return { error: kubeForm };
    const [, namespace, name, key] = m as unknown as [string, string, string, string];
    if (!dnsLabel.test(namespace)) return { error: `${kubeForm}: the namespace is not a DNS-1123 label` };
    if (!dnsSubdomain.test(name)) return { error: `${kubeForm}: the Secret's name is not a DNS-1123 subdomain` };
    if (!kubeKey.test(key))
      return { error: `${kubeForm}: the key after "#" is empty or has other characters than letters, digits, "-", "_", "."` };
    return { ref: { kind: "k8s", namespace, name, key } };
  }
  return undefined;
}

export function isStoreSecretRef(ref: DeploySecretRef): ref is StoreSecretRef {
  return ref.kind === "vault" || ref.kind === "k8s";
}

/**
 * An envconfig secret's reference: `file:/absolute/path`, `env:NAME`, `vault:mount/path#key` or
 * `k8s:namespace/name#key`. Store references are checked here for their form only; whether the
 * deploy's tenant may read them is checked at submission (see tenant-secret-paths.ts).
 */
export const deploySecretRefSchema = z.string().transform((ref, ctx): DeploySecretRef => {
  const store = parseStoreSecretRef(ref);
  if (store && "ref" in store) return store.ref;
  if (store) {
    ctx.addIssue({ code: "custom", message: store.error });
    return z.NEVER;
  }
  const local = secretRefSchema.safeParse(ref);
  if (local.success) return local.data;
  ctx.addIssue({
    code: "custom",
    message: 'must be "file:/absolute/path", "env:NAME", "vault:mount/path#key" or "k8s:namespace/name#key"',
  });
  return z.NEVER;
});

export function formatDeploySecretRef(ref: DeploySecretRef): string {
  if (ref.kind === "vault") return `vault:${ref.mount}/${ref.path}#${ref.key}`;
  if (ref.kind === "k8s") return `k8s:${ref.namespace}/${ref.name}#${ref.key}`;
  return formatSecretRef(ref);
}
