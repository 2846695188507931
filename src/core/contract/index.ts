export * from "./types.js";
export * from "./deployer.js";
export * from "./targets.js";
export * from "./result-error.js";
export * from "./hosted-plugin.js";
export * from "./field-path.js";
