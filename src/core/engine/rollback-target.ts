import { Code, ManentError } from "../errors.js";
import type { DeployStore } from "./deploy-store.js";
import type { ResolvedDeploy } from "./resolve.js";

/** The version a user rollback returns to: the one asked for, else the last good one before the current. */
export async function rollbackTarget(store: DeployStore, r: ResolvedDeploy): Promise<string> {
  if (r.to) return r.to;
  const key = { tenant: r.tenant, application: r.application, artifact: r.artifact.name, environment: r.environment };
  const current = await store.lastSucceeded(key);
  const previous = current ? await store.lastSucceeded(key, current.version) : undefined;
  if (!previous) {
    throw new ManentError(
      Code.FailedPrecondition,
      `nothing to roll back to: ${r.application}/${r.environment} has no earlier successful release (use --to VERSION)`,
    );
  }
  return previous.version;
}
