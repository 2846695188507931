export * from "./workload-identity-check.js";
export * from "./workload-issuers.js";
export * from "./workload-match.js";
