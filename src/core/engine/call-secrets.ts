import type { SecretsAccessor } from "../contract/index.js";
import { formatDeploySecretRef, isStoreSecretRef, readSecretRef, type DeploySecretRef } from "../config/index.js";
import { Code, ManentError } from "../errors.js";
import type { SecretStores } from "../secret-stores/secret-stores.js";

export interface CallSecrets {
  accessor: SecretsAccessor;
  /** Ends the call: every later lookup fails. */
  close(): void;
}

/**
 * Secrets for one plugin call. Values are read from their references at lookup time (a file, a
 * variable, or asked of the store: `stores`), never stored, and only while the call runs; a lookup
 * after `close()`, or of a name the envconfig does not declare, fails with `failed_precondition`
 * (permanent). A store's error keeps its code (unavailable: retried) and names the reference.
 */
export function openCallSecrets(refs: ReadonlyMap<string, DeploySecretRef>, call: string, stores: SecretStores | undefined): CallSecrets {
  let open = true;
  return {
    accessor: {
      async secret(name: string): Promise<string> {
        if (!open) {
          throw new ManentError(Code.FailedPrecondition, `secret "${name}" requested after the ${call} call returned`);
        }
        const ref = refs.get(name);
        if (!ref) {
          // The envconfig has to change before the lookup can succeed: a retry cannot fix it.
          throw new ManentError(
            Code.FailedPrecondition,
            `secret "${name}" is not declared in the envconfig's secrets (add {name: ${name}, ref: "file:/path", "env:NAME", "vault:mount/path#key" or "k8s:namespace/name#key"} under secrets:)`,
            { details: { secret: name } },
          );
        }
        if (!isStoreSecretRef(ref)) return readSecretRef(name, ref);
        if (!stores)
          throw new ManentError(
            Code.FailedPrecondition,
            `secret "${name}" (${formatDeploySecretRef(ref)}): no secret store is open in this process`,
            {
              details: { secret: name },
            },
          );
        return stores.read(ref).catch((err: unknown) => {
          const e = ManentError.from(err);
          throw new ManentError(e.code, `secret "${name}": ${e.message}`, { details: { ...e.details, secret: name } });
        });
      },
    },
    close() {
      open = false;
    },
  };
}

/** The accessor of calls that get no secrets (Validate). */
export const noSecrets = (call: string): SecretsAccessor => ({
  secret(name: string): Promise<string> {
    return Promise.reject(new ManentError(Code.PermissionDenied, `secret "${name}": the ${call} call has no access to secrets`));
  },
});
