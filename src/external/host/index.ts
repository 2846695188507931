export { ExternalPlugin, type ExternalPluginOptions } from "./external-plugin.js";
export { defaultSupervision, type SupervisionOptions } from "./supervision.js";
export { parseExternalEntry, parseDuration, type ExternalConfig } from "./config.js";
export { checkBinary } from "./activation.js";
export { inheritedVariables } from "./environment.js";
