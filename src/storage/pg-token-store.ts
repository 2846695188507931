import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { Grant, Principal, RoleName } from "../core/identity/index.js";

/** A managed API token as stored: everything but its value, of which only the sha256 is kept. */
export interface ManagedToken {
  id: string;
  name: string;
  grant: Grant;
  created_at: string;
  created_by: { id: string; name: string };
  expires_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_by: { id: string; name: string } | null;
}

export interface NewManagedToken {
  name: string;
  grant: Grant;
  secretSha256: Buffer;
  createdBy: Pick<Principal, "id" | "name">;
  expiresInMs: number;
}

const columns = `id, name, role, tenant, application, environment, created_at, created_by_id, created_by_name, expires_at,
  last_used_at, revoked_at, revoked_by_id, revoked_by_name`;

/** The managed tokens table (tokens-schema.ts). */
export class PgTokenStore {
  constructor(private readonly pool: pg.Pool) {}

  /** Inserts a token; `undefined` when the name is taken (by a token, revoked or not). */
  async create(t: NewManagedToken): Promise<ManagedToken | undefined> {
    const r = await this.pool.query(
      `insert into manent.api_tokens (id, name, role, tenant, application, environment, secret_sha256, created_by_id, created_by_name, expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + $10 * interval '1 millisecond')
       on conflict (name) do nothing
       returning ${columns}`,
      [
        randomUUID(),
        t.name,
        t.grant.role,
        t.grant.scope.tenant,
        t.grant.scope.application,
        t.grant.scope.environment,
        t.secretSha256,
        t.createdBy.id,
        t.createdBy.name,
        t.expiresInMs,
      ],
    );
    return r.rows[0] ? toToken(r.rows[0] as Row) : undefined;
  }

  /**
   * The token whose value has this sha256, with the database's clock (expiry is judged by one clock
   * for the whole fleet), and whom it acts for: its creator, or, for a token created with another
   * managed token, that token's creator, and so on up to the first creator that is no managed
   * token (a person, a manent.yml token). Tokens created since a managed token acts for its creator
   * record that root already; the walk covers those created before, and only follows tokens older
   * than the one they made (a manent.yml token added later under an old managed token's name is not
   * mistaken for it).
   */
  async findBySecret(
    secretSha256: Buffer,
  ): Promise<{ token: ManagedToken; expired: boolean; actsFor: Pick<Principal, "id" | "name"> } | undefined> {
    const r = await this.pool.query(
      `select ${columns}, expires_at <= now() as expired, root.acts_for_id, root.acts_for_name
       from manent.api_tokens t
       cross join lateral (
         with recursive chain(depth, created_at, by_id, by_name) as (
           select 0, t.created_at, t.created_by_id, t.created_by_name
           union all
           select c.depth + 1, p.created_at, p.created_by_id, p.created_by_name
           from chain c join manent.api_tokens p on c.by_id = 'token:' || p.name and p.created_at < c.created_at
           where c.depth < 32
         )
         select by_id as acts_for_id, by_name as acts_for_name from chain order by depth desc limit 1
       ) root
       where t.secret_sha256 = $1`,
      [secretSha256],
    );
    const row = r.rows[0] as (Row & { expired: boolean; acts_for_id: string; acts_for_name: string }) | undefined;
    return row ? { token: toToken(row), expired: row.expired, actsFor: { id: row.acts_for_id, name: row.acts_for_name } } : undefined;
  }

  async get(id: string): Promise<ManagedToken | undefined> {
    const r = await this.pool.query(`select ${columns} from manent.api_tokens where id = $1`, [id]);
    return r.rows[0] ? toToken(r.rows[0] as Row) : undefined;
  }

  /** Newest first. */
  async list(limit: number): Promise<ManagedToken[]> {
    const r = await this.pool.query(`select ${columns} from manent.api_tokens order by created_at desc, id limit $1`, [limit]);
    return (r.rows as Row[]).map(toToken);
  }

  /** Revokes a token not revoked yet; `undefined` when it was (or does not exist). */
  async revoke(id: string, by: Pick<Principal, "id" | "name">): Promise<ManagedToken | undefined> {
    const r = await this.pool.query(
      `update manent.api_tokens set revoked_at = now(), revoked_by_id = $2, revoked_by_name = $3
       where id = $1 and revoked_at is null returning ${columns}`,
      [id, by.id, by.name],
    );
    return r.rows[0] ? toToken(r.rows[0] as Row) : undefined;
  }

  /** Records a use, unless one was recorded less than `withinMs` ago (by any server). */
  async touch(id: string, withinMs: number): Promise<void> {
    await this.pool.query(
      `update manent.api_tokens set last_used_at = now()
       where id = $1 and (last_used_at is null or last_used_at < now() - $2 * interval '1 millisecond')`,
      [id, withinMs],
    );
  }
}

interface Row {
  id: string;
  name: string;
  role: RoleName;
  tenant: string;
  application: string;
  environment: string;
  created_at: Date;
  created_by_id: string;
  created_by_name: string;
  expires_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  revoked_by_id: string | null;
  revoked_by_name: string | null;
}

function toToken(r: Row): ManagedToken {
  return {
    id: r.id,
    name: r.name,
    grant: { role: r.role, scope: { tenant: r.tenant, application: r.application, environment: r.environment } },
    created_at: r.created_at.toISOString(),
    created_by: { id: r.created_by_id, name: r.created_by_name },
    expires_at: r.expires_at.toISOString(),
    last_used_at: r.last_used_at?.toISOString() ?? null,
    revoked_at: r.revoked_at?.toISOString() ?? null,
    revoked_by: r.revoked_at === null ? null : { id: r.revoked_by_id ?? "", name: r.revoked_by_name ?? "" },
  };
}
