/** One line of the audit log. `outcome` is "ok" or the error code the action failed with. */
export interface AuditEntry {
  id: number;
  at: string;
  /** Who acted, by the name people read: a person's e-mail (else subject), a token's name; null when unknown (a refused sign-in). */
  actor: string | null;
  /** "user", "token" or "anonymous"; null when unknown, and in entries written before it was recorded. */
  actor_kind: string | null;
  /** The principal's unique id: "user:<subject>", "token:<name>", "anonymous". */
  actor_id: string | null;
  actor_email: string | null;
  /** A person's groups when they acted. */
  actor_groups: string[] | null;
  tenant: string | null;
  application: string | null;
  environment: string | null;
  action: string;
  deploy_id: string | null;
  outcome: string;
  message: string | null;
  client_address: string | null;
}

export type NewAuditEntry = Omit<AuditEntry, "id" | "at">;
