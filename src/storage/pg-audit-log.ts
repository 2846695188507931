import type pg from "pg";

/** One line of the audit log. `outcome` is "ok" or the error code the action failed with. */
export interface AuditEntry {
  id: number;
  at: string;
  /** The token's name; null for a refused sign-in. */
  actor: string | null;
  tenant: string | null;
  action: string;
  deploy_id: string | null;
  outcome: string;
  message: string | null;
  client_address: string | null;
}

export type NewAuditEntry = Omit<AuditEntry, "id" | "at">;

export interface AuditFilter {
  /** Only this tenant's entries (a tenant's token always has this set to its own). */
  tenant?: string;
  actor?: string;
  action?: string;
  deploy_id?: string;
  outcome?: string;
  /** Entries older than this id (paging back). */
  before?: number;
  limit: number;
}

/** The append-only audit table (see audit-schema.ts): append and read, nothing else. */
export class PgAuditLog {
  constructor(private readonly pool: pg.Pool) {}

  async append(e: NewAuditEntry): Promise<void> {
    await this.pool.query(
      `insert into manent.audit (actor, tenant, action, deploy_id, outcome, message, client_address) values ($1, $2, $3, $4, $5, $6, $7)`,
      [e.actor, e.tenant, e.action, e.deploy_id, e.outcome, e.message, e.client_address],
    );
  }

  /** Newest first. */
  async list(f: AuditFilter): Promise<AuditEntry[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    for (const key of ["tenant", "actor", "action", "deploy_id", "outcome"] as const) {
      const value = f[key];
      if (value !== undefined) where.push(`${key} = $${args.push(value)}`);
    }
    if (f.before !== undefined) where.push(`id < $${args.push(f.before)}`);
    const rows = await this.pool.query(
      `select id, at, actor, tenant, action, deploy_id, outcome, message, client_address from manent.audit
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
