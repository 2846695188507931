/**
 * What the audit log records, one name per kind of change: the actions of grants.ts that change
 * something, the token admin's two, sign-ins and sign-outs, uploads removed, and commands on
 * releases. The routes, the CLI's help and the web UI's filter all take their names from here.
 */
export const auditActions = [
  "submit",
  "dry_run",
  "retry",
  "rollback",
  "cancel",
  "approve",
  "promote",
  "abort",
  "plugin_restart",
  "envconfig_refresh",
  "token_create",
  "token_revoke",
  "sign_in",
  "sign_out",
  "upload_delete",
  "upload_sweep",
  "release_start",
  "release_cancel",
  "release_approve",
  "release_promote",
  "release_retry",
  "retention_sweep",
  "window_override",
] as const;
export type AuditAction = (typeof auditActions)[number];
