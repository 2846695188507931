export * from "./authenticator.js";
export * from "./credential-check.js";
export * from "./grants-for-user.js";
export * from "./static-tokens.js";
export * from "./access.js";
