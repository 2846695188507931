export { ExternalPlugin, type ExternalPluginOptions } from "./external-plugin.js";
export { defaultSupervision, type SupervisionOptions } from "./supervision.js";
export { parseExternalEntry, fromSpec, type ExternalConfig } from "./config.js";
export { checkBinary } from "./activation.js";
export { inheritedVariables } from "./environment.js";
export { PluginHost, type PluginHostOptions } from "./plugin-host.js";
