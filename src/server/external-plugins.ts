import type { Registry } from "prom-client";
import type { ExternalPluginFactory } from "../core/engine/plugin-registry.js";

/**
 * The go-plugin host behind `plugins.<name>.external` entries: activation checks the binary now;
 * the process starts on the plugin's first use. The host (gRPC, protobuf, x509) is loaded only when
 * manent.yml names an external plugin: a server without one starts without it.
 */
export function externalPluginFactory(registry?: Registry): ExternalPluginFactory {
  return async (spec) => {
    const { ExternalPlugin } = await import("../external/host/index.js");
    return ExternalPlugin.activate({
      name: spec.name,
      spec: { external: spec.external, config: spec.config },
      baseDir: spec.baseDir,
      logger: spec.logger,
      builtinNames: spec.builtinNames,
      ...(registry && { registry }),
    });
  };
}
