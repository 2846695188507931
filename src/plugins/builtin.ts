import type { Factory } from "../core/contract/index.js";
import { kubernetesFactory } from "./kubernetes/index.js";
import { noopFactory } from "./noop/index.js";
import { remoteCopyFactory } from "./remote-copy/index.js";

/**
 * The plugins compiled into manent, by name. A manent.yml `plugins` entry with one of these names
 * configures the built-in; an `external` entry may not reuse these names.
 */
export const builtinPlugins: Record<string, Factory> = {
  kubernetes: kubernetesFactory,
  noop: noopFactory,
  "remote-copy": remoteCopyFactory,
};
