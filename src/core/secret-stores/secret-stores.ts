import type { StoreSecretRef } from "../config/store-secret-ref.js";

/**
 * The external secret stores manent.yml configures (secret_stores), as the engine sees them; the
 * adapters that speak to Vault and Kubernetes are in src/net/secret-stores.
 *
 * A read returns the value and keeps it nowhere. Its errors name the reference, never a value:
 * `unavailable` (retried) when the store cannot be reached or answers 5xx; `failed_precondition`
 * when the path or key does not exist and `permission_denied` when the store refuses it (both
 * permanent: a retry asks the same question).
 */
export interface SecretStores {
  read(ref: StoreSecretRef, signal?: AbortSignal): Promise<string>;
  /** Stops token renewals; later reads fail. */
  close(): void;
}
