import type { Factory } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { KubernetesDeployer } from "./plugin.js";

export { KubernetesDeployer, pluginName } from "./plugin.js";
export { parseParams, type KubernetesParams } from "./params.js";

/** The built-in `kubernetes` plugin. It takes no manent.yml configuration (`kubernetes: {}`). */
export const kubernetesFactory: Factory = (config, logger) => {
  const extra = Object.keys(config ?? {});
  if (extra.length > 0) {
    throw new ManentError(Code.InvalidArgument, `plugin kubernetes: unknown configuration key ${extra.map((k) => JSON.stringify(k)).join(", ")} (it takes none; settings are envconfig params)`);
  }
  return new KubernetesDeployer(logger);
};
