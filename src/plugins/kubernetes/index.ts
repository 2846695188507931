import type { Factory } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { KubernetesDeployer } from "./plugin.js";

export { KubernetesDeployer, pluginName } from "./plugin.js";
export { parseParams, type KubernetesParams } from "./params.js";

/**
 * The built-in `kubernetes` plugin. It takes no manent.yml configuration (`kubernetes: {}`); all
 * settings are envconfig params (see params.ts): `namespace`, `token_secret`, `ca_secret` (a PEM
 * bundle may hold several clusters' CAs), `wait_timeout` (default 5m, `0` = no wait),
 * `require_image_digest`, `history_limit` (default 10), `force_conflicts`, `var.NAME`, and for
 * charts `helm_values_files`, `helm_value.KEY`, `helm_values`, `helm_include_hooks`,
 * `helm_release_name`. Each target is a cluster at `https://host:port` (port 443 by default); its
 * labels `token_secret` and `ca_secret` name that cluster's own secrets, overriding the params'.
 */
export const kubernetesFactory: Factory = (config, logger) => {
  const extra = Object.keys(config ?? {});
  if (extra.length > 0) {
    throw new ManentError(
      Code.InvalidArgument,
      `plugin kubernetes: unknown configuration key ${extra.map((k) => JSON.stringify(k)).join(", ")} (it takes none; settings are envconfig params)`,
    );
  }
  return new KubernetesDeployer(logger);
};
