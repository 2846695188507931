import type pg from "pg";
import type { AuditEntry, NewAuditEntry, ScopePattern } from "../core/identity/index.js";
import { scopeCondition } from "./scope-sql.js";

export type { AuditEntry, NewAuditEntry } from "../core/identity/audit-entry.js";

export interface AuditFilter {
  /** Only entries within these scopes (where the caller may read the audit); absent: all. */
  scopes?: readonly ScopePattern[];
  tenant?: string;
  actor?: string;
  actor_id?: string;
  action?: string;
  deploy_id?: string;
  outcome?: string;
  /** Entries older than this id (paging back). */
  before?: number;
  limit: number;
}

const columns = `id, at, actor, actor_kind, actor_id, actor_email, actor_groups, tenant, application, environment, action, deploy_id,
  outcome, message, client_address`;

/** The append-only audit table (see audit-schema.ts): append and read, nothing else. */
export class PgAuditLog {
  constructor(private readonly pool: pg.Pool) {}

  async append(e: NewAuditEntry): Promise<void> {
    await this.pool.query(insertAuditEntry(1), auditEntryValues(e));
  }

  /** Newest first. */
  async list(f: AuditFilter): Promise<AuditEntry[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    for (const key of ["tenant", "actor", "actor_id", "action", "deploy_id", "outcome"] as const) {
      const value = f[key];
      if (value !== undefined) where.push(`${key} = $${args.push(value)}`);
    }
    const visible = f.scopes && scopeCondition(f.scopes, args);
    if (visible) where.push(visible);
    if (f.before !== undefined) where.push(`id < $${args.push(f.before)}`);
    const rows = await this.pool.query(
      `select ${columns} from manent.audit
       ${where.length ? `where ${where.join(" and ")}` : ""} order by id desc limit $${args.push(f.limit)}`,
      args,
    );
    return rows.rows.map((r: Record<string, unknown>) => ({
      ...(r as unknown as AuditEntry),
      id: Number(r.id),
      at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
    }));
  }
}

/**
 * The insert of one entry, its values from parameter `$first` on in {@link auditEntryValues}'s
 * order: also used inside another statement, so that an action's entry commits with what it did.
 */
export function insertAuditEntry(first: number): string {
  const params = Array.from({ length: 13 }, (_, i) => `$${first + i}`).join(", ");
  return `insert into manent.audit (actor, actor_kind, actor_id, actor_email, actor_groups, tenant, application, environment, action,
         deploy_id, outcome, message, client_address)
       values (${params})`;
}

export function auditEntryValues(e: NewAuditEntry): unknown[] {
  return [
    e.actor,
    e.actor_kind,
    e.actor_id,
    e.actor_email,
    e.actor_groups === null ? null : JSON.stringify(e.actor_groups),
    e.tenant,
    e.application,
    e.environment,
    e.action,
    e.deploy_id,
    e.outcome,
    e.message,
    e.client_address,
  ];
}
