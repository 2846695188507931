import type { Factory } from "../core/contract/index.js";

/** Loads a plugin's module on first use, so the CLI and a server without that plugin never pay for its dependencies. */
const lazy =
  (load: () => Promise<Factory>): Factory =>
  async (config, logger) =>
    (await load())(config, logger);

/**
 * The plugins compiled into manent, by name. A manent.yml `plugins` entry with one of these names
 * configures the built-in; an `external` entry may not reuse these names.
 */
export const builtinPlugins: Record<string, Factory> = {
  kubernetes: lazy(async () => (await import("./kubernetes/index.js")).kubernetesFactory),
  noop: lazy(async () => (await import("./noop/index.js")).noopFactory),
  "remote-copy": lazy(async () => (await import("./remote-copy/index.js")).remoteCopyFactory),
};
