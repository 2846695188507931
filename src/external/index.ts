export * from "./host/index.js";
export { serve, type ServeOptions } from "./sdk/index.js";
export { MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, APP_PROTOCOL_VERSION, CORE_PROTOCOL_VERSION } from "./protocol/constants.js";
