import type { Logger } from "../../core/contract/index.js";
import type { SecretStoresConfig } from "../../core/config/secret-stores-config.js";
import { formatDeploySecretRef, type StoreSecretRef } from "../../core/config/store-secret-ref.js";
import { Code, ManentError } from "../../core/errors.js";
import type { SecretStores } from "../../core/secret-stores/secret-stores.js";
import { KubeSecretStore } from "./kube-secret-store.js";
import { VaultStore } from "./vault-store.js";

/**
 * The stores manent.yml configures, ready to read. Their CA files are read now, so a missing one
 * stops the server's start naming the field; nothing is asked of a store until a step needs it.
 */
export async function openSecretStores(
  config: SecretStoresConfig,
  configFile: string,
  baseDir: string,
  logger: Logger,
): Promise<SecretStores> {
  const vault = config.vault && (await VaultStore.open(config.vault, configFile, baseDir, logger));
  const kube = config.kubernetes && (await KubeSecretStore.open(config.kubernetes, configFile, baseDir));
  return {
    read(ref: StoreSecretRef): Promise<string> {
      if (ref.kind === "vault" && vault) return vault.read(ref);
      if (ref.kind === "k8s" && kube) return kube.read(ref);
      // Refused at submission already; a deploy recorded before the store was removed from manent.yml gets here.
      const what = ref.kind === "vault" ? "secret_stores.vault" : "secret_stores.kubernetes";
      const shown = formatDeploySecretRef(ref);
      return Promise.reject(
        new ManentError(Code.FailedPrecondition, `${shown}: ${configFile} configures no such store (${what})`, { details: { ref: shown } }),
      );
    },
    close(): void {
      vault?.close();
      kube?.close();
    },
  };
}
