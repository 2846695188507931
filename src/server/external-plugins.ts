import type { Registry } from "prom-client";
import type { ExternalPluginFactory } from "../core/engine/plugin-registry.js";
import { ExternalPlugin } from "../external/host/index.js";

/**
 * The go-plugin host behind `plugins.<name>.external` entries: activation checks the binary now;
 * the process starts on the plugin's first use.
 */
export function externalPluginFactory(registry?: Registry): ExternalPluginFactory {
  return (spec) =>
    ExternalPlugin.activate({
      name: spec.name,
      spec: { external: spec.external, config: spec.config },
      baseDir: spec.baseDir,
      logger: spec.logger,
      builtinNames: spec.builtinNames,
      ...(registry && { registry }),
    });
}
