export * from "./constants.js";
export * from "./handshake.js";
export * from "./mtls.js";
export * from "./credentials.js";
export * from "./broker.js";
export * from "./convert.js";
export * from "./wire-errors.js";
export * from "./hclog.js";
