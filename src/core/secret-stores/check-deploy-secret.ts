import { checkSecretRef, type LoadedConfig } from "../config/index.js";
import { formatDeploySecretRef, isStoreSecretRef, type DeploySecretRef } from "../config/store-secret-ref.js";
import { Code, ManentError } from "../errors.js";
import { refusedStoreRef } from "./tenant-secret-paths.js";

/**
 * The check of an envconfig secret at submission: a file or variable must be readable now; a
 * store reference must be one the deploy's tenant may read (the store itself is asked only at the
 * step that needs the value). Throws `invalid_argument` with the reason; the caller names file and field.
 */
export async function checkDeploySecret(config: LoadedConfig, tenant: string, name: string, ref: DeploySecretRef): Promise<void> {
  if (!isStoreSecretRef(ref)) return checkSecretRef(name, ref);
  const refused = refusedStoreRef(config.secret_stores, tenant, ref);
  if (refused !== undefined)
    throw new ManentError(Code.InvalidArgument, `secret "${name}": ${refused}`, {
      details: { secret: name, ref: formatDeploySecretRef(ref) },
    });
}
