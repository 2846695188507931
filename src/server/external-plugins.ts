import type { ExternalPluginFactory } from "../core/engine/plugin-registry.js";

/** The go-plugin host for `plugins.<name>.external` entries; undefined until the host is built in. */
export const externalPluginFactory: ExternalPluginFactory | undefined = undefined;
