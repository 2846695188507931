import type { SecretStoresConfig } from "../config/secret-stores-config.js";
import { formatDeploySecretRef, type StoreSecretRef } from "../config/store-secret-ref.js";

/**
 * Why `tenant` may not reference `ref`, or undefined when it may. Stores are the operator's
 * (manent.yml); a tenant's envconfig reaches only the paths or namespaces listed for that tenant,
 * so one tenant can never name another's secrets, whoever writes its envconfig.
 */
export function refusedStoreRef(stores: SecretStoresConfig, tenant: string, ref: StoreSecretRef): string | undefined {
  const shown = formatDeploySecretRef(ref);
  if (ref.kind === "vault") {
    const vault = stores.vault;
    if (!vault) return `${shown}: no Vault store is configured (secret_stores.vault in manent.yml)`;
    const prefixes = Object.hasOwn(vault.tenants, tenant) ? vault.tenants[tenant]! : [];
    const full = `${ref.mount}/${ref.path}`;
    if (prefixes.some((p) => full === p || full.startsWith(`${p}/`))) return undefined;
    return prefixes.length === 0
      ? `${shown}: tenant ${tenant} may reference no Vault path (secret_stores.vault.tenants in manent.yml lists none for it)`
      : `${shown}: tenant ${tenant} may reference only Vault paths under ${prefixes.map((p) => `${p}/`).join(", ")}`;
  }
  const kube = stores.kubernetes;
  if (!kube) return `${shown}: no Kubernetes store is configured (secret_stores.kubernetes in manent.yml)`;
  const namespaces = Object.hasOwn(kube.tenants, tenant) ? kube.tenants[tenant]! : [];
  if (namespaces.includes(ref.namespace)) return undefined;
  return namespaces.length === 0
    ? `${shown}: tenant ${tenant} may reference no Kubernetes namespace (secret_stores.kubernetes.tenants in manent.yml lists none for it)`
    : `${shown}: tenant ${tenant} may reference only Secrets in namespace${namespaces.length > 1 ? "s" : ""} ${namespaces.join(", ")}`;
}
