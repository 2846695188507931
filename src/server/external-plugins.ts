import type { Registry } from "prom-client";
import type { ExternalPluginFactory } from "../core/engine/plugin-registry.js";
import type { PluginHost } from "../external/host/index.js";

/**
 * The go-plugin host behind `plugins.<name>.external` entries: activation checks the binary now;
 * the process starts on the plugin's first use. The host (gRPC, protobuf, x509) is loaded only when
 * manent.yml names an external plugin: a server without one starts without it. The server's
 * external plugins share one PluginHost: private copies under `<workdir>/plugins` (what a server
 * that died left there is removed now), one AutoMTLS identity, generated while the server starts.
 */
export function externalPluginFactory(registry?: Registry): ExternalPluginFactory {
  let host: Promise<PluginHost> | undefined;
  return async (spec) => {
    const { ExternalPlugin, PluginHost } = await import("../external/host/index.js");
    host ??= PluginHost.create({ workdir: spec.workdir, logger: spec.logger }).then((h) => (h.warmUp(), h));
    return ExternalPlugin.activate({
      name: spec.name,
      spec: { external: spec.external, config: spec.config },
      baseDir: spec.baseDir,
      logger: spec.logger,
      builtinNames: spec.builtinNames,
      host: await host,
      ...(registry && { registry }),
    });
  };
}
