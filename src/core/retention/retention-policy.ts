import type { Keep, RetentionConfig } from "../config/retention-config.js";
import { matchesPattern } from "../identity/grants.js";

/** The policy of one application/environment's deploys: the first rule that matches and sets one, else the default; undefined keeps all. */
export function deployPolicy(config: RetentionConfig, key: { tenant: string; application: string; environment: string }): Keep | undefined {
  const rule = config.rules.find(
    (r) =>
      r.deploys !== undefined &&
      matchesPattern(r.tenant, key.tenant) &&
      matchesPattern(r.application, key.application) &&
      matchesPattern(r.environment, key.environment),
  );
  return rule?.deploys ?? config.deploys;
}

/** The policy of one application's releases (a release spans environments: a rule's environment is not looked at). */
export function releasePolicy(config: RetentionConfig, key: { tenant: string; application: string }): Keep | undefined {
  const rule = config.rules.find(
    (r) => r.releases !== undefined && matchesPattern(r.tenant, key.tenant) && matchesPattern(r.application, key.application),
  );
  return rule?.releases ?? config.releases;
}
