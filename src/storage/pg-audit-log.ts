import type pg from "pg";
import type { ScopePattern } from "../core/identity/index.js";
import { scopeCondition } from "./scope-sql.js";

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
    await this.pool.query(
      `insert into manent.audit (actor, actor_kind, actor_id, actor_email, actor_groups, tenant, application, environment, action,
         deploy_id, outcome, message, client_address)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [
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
      ],
    );
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
