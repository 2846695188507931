export * from "./grants.js";
export * from "./policy.js";
export type { Principal, PrincipalKind } from "./principal.js";
export * from "./delegation.js";
export * from "./audit-actions.js";
export type { AuditEntry, NewAuditEntry } from "./audit-entry.js";
