import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";

/** Web UI sessions: only the sha256 of a session's id is stored, so a database dump signs nobody in. */
export const sessionStatements = [
  `create table if not exists manent.sessions (
     id_sha256 bytea primary key,
     subject text not null,
     email text,
     groups jsonb not null,
     created_at timestamptz not null default now(),
     expires_at timestamptz not null
   )`,
  `create index if not exists sessions_expiry on manent.sessions (expires_at)`,
  // Null in sessions made before it was recorded: their e-mail counts as unverified.
  `alter table manent.sessions add column if not exists email_verified boolean`,
];

export interface SessionIdentity {
  subject: string;
  email?: string | undefined;
  /** The provider vouched for `email` at sign-in (email_verified: true). */
  emailVerified: boolean;
  groups: string[];
}

export interface Session extends SessionIdentity {
  expiresAt: Date;
}

export class PgSessionStore {
  constructor(private readonly db: pg.Pool) {}

  /** A new session; returns its id (the cookie's value), which is nowhere else. Expired sessions are dropped on the way. */
  async create(identity: SessionIdentity, ttlMs: number): Promise<{ id: string; expiresAt: Date }> {
    const id = randomBytes(32).toString("base64url");
    await this.db.query("delete from manent.sessions where expires_at < now()");
    const { rows } = await this.db.query<{ expires_at: Date }>(
      `insert into manent.sessions (id_sha256, subject, email, email_verified, groups, expires_at)
       values ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond') returning expires_at`,
      [digest(id), identity.subject, identity.email ?? null, identity.emailVerified, JSON.stringify(identity.groups), ttlMs],
    );
    return { id, expiresAt: rows[0]!.expires_at };
  }

  /** The live session of this id, or undefined (unknown, expired or ended). */
  async find(id: string): Promise<Session | undefined> {
    if (id.length > 256) return undefined;
    const { rows } = await this.db.query<{
      subject: string;
      email: string | null;
      email_verified: boolean | null;
      groups: string[];
      expires_at: Date;
    }>("select subject, email, email_verified, groups, expires_at from manent.sessions where id_sha256 = $1 and expires_at > now()", [
      digest(id),
    ]);
    const row = rows[0];
    if (!row) return undefined;
    return {
      subject: row.subject,
      ...(row.email !== null && { email: row.email }),
      emailVerified: row.email_verified === true,
      groups: row.groups,
      expiresAt: row.expires_at,
    };
  }

  /** Ends a session (logout); true if it was live. */
  async end(id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("delete from manent.sessions where id_sha256 = $1", [digest(id)]);
    return (rowCount ?? 0) > 0;
  }
}

function digest(id: string): Buffer {
  return createHash("sha256").update(id).digest();
}
