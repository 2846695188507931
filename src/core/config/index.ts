export * from "./duration.js";
export * from "./yaml-file.js";
export * from "./secret-ref.js";
export * from "./descriptor.js";
export * from "./envconfig.js";
export * from "./manent-config.js";
export * from "./load-manent-config.js";
export * from "./envconfig-provider.js";
