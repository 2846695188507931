/**
 * The public entry for TypeScript external plugins: the plugin-author API plus `serve`, which runs
 * a factory as a go-plugin compatible plugin process (see docs/plugin-protocol.md).
 */
export * from "./plugin.js";
export { serve, type ServeOptions, hclogLogger } from "./external/sdk/index.js";
