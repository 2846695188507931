import type { SecretsAccessor } from "../contract/index.js";
import { readSecretRef, type SecretRef } from "../config/index.js";
import { Code, ManentError } from "../errors.js";

export interface CallSecrets {
  accessor: SecretsAccessor;
  /** Ends the call: every later lookup fails. */
  close(): void;
}

/**
 * Secrets for one plugin call. Values are read from their references at lookup time, never
 * stored, and only while the call runs; a lookup after `close()`, or of a name the envconfig does not
 * declare, fails with `failed_precondition` (permanent).
 */
export function openCallSecrets(refs: ReadonlyMap<string, SecretRef>, call: string): CallSecrets {
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
            `secret "${name}" is not declared in the envconfig's secrets (add {name: ${name}, ref: "file:/path" or "env:NAME"} under secrets:)`,
            { details: { secret: name } },
          );
        }
        return readSecretRef(name, ref);
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
