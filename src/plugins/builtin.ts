import type { Factory } from "../core/contract/index.js";
import { noopFactory } from "./noop/index.js";

/**
 * The plugins compiled into manent, by name. A manent.yml `plugins` entry with one of these names
 * configures the built-in; an `external` entry may not reuse these names.
 */
export const builtinPlugins: Record<string, Factory> = {
  noop: noopFactory,
};
