import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import {
  hashMismatch,
  overQuota,
  tooLarge,
  type UploadClaimant,
  type UploadEntry,
  type UploadLimits,
  type UploadResult,
  type UploadStore,
} from "../core/artifacts/upload-store.js";
import { Code, ManentError } from "../core/errors.js";
import { inTransaction } from "./database-pool.js";

/** Rows of this size keep memory flat while a large upload streams in or out. */
const chunkSize = 1024 * 1024;

export const uploadStatements = [
  `create table if not exists manent.uploads (
     tenant text not null,
     sha256 text not null,
     size bigint not null,
     created_at timestamptz not null default now(),
     primary key (tenant, sha256)
   )`,
  `create table if not exists manent.upload_chunks (
     tenant text not null,
     sha256 text not null,
     seq integer not null,
     data bytea not null,
     primary key (tenant, sha256, seq)
   )`,
  // When a submission last named the upload: a retention sweep leaves uploads used lately (upload-retention.ts).
  `alter table manent.uploads add column if not exists last_used_at timestamptz`,
  // The submissions that named an upload and may not have a deploy record yet (see upload-retention.ts):
  // written before the deploy's workflow is queued, so a deletion finds every workflow that may still fetch it.
  `create table if not exists manent.upload_claims (
     tenant text not null,
     sha256 text not null,
     id text not null,
     application text not null,
     artifact text not null,
     environment text not null,
     version text not null,
     claimed_at timestamptz not null default now(),
     primary key (tenant, sha256, id)
   )`,
];

const lockKey = "hashtext('manent.uploads'), hashtext($1)";

/**
 * Serializes, within a transaction, what changes one tenant's uploads: the quota check and write of
 * an upload, a deletion, a sweep. Two uploads at once cannot both fit in the room left for one.
 */
export async function lockTenantUploads(client: pg.ClientBase, tenant: string): Promise<void> {
  await client.query(`select pg_advisory_xact_lock(${lockKey})`, [tenant]);
}

/**
 * Uploads kept in the deploys' Postgres, so a deploy run by any server of a fleet finds the file
 * another server received. A body is first received into a file of the spool directory (its
 * sha256 and size checked on the way), and only a whole, verified body is written to the
 * database, in 1 MiB rows inside one short transaction with its `uploads` row last: a client that
 * sends slowly or drops its connection holds a file handle, never a database connection, and
 * leaves nothing visible.
 */
export class PgUploadStore implements UploadStore {
  constructor(
    private readonly pool: pg.Pool,
    /** Where bodies are received before they are verified; emptied by {@link PgUploadStore.prepare}. */
    private readonly spoolDir: string,
  ) {}

  /** Creates the spool directory and removes what a stopped server left in it. */
  async prepare(): Promise<void> {
    await rm(this.spoolDir, { recursive: true, force: true });
    await mkdir(this.spoolDir, { recursive: true, mode: 0o700 });
  }

  async size(tenant: string, sha256: string): Promise<number | undefined> {
    const r = await this.pool.query<{ size: string }>("select size from manent.uploads where tenant = $1 and sha256 = $2", [
      tenant,
      sha256,
    ]);
    return r.rows[0] ? Number(r.rows[0].size) : undefined;
  }

  async claim(tenant: string, sha256: string, by?: UploadClaimant): Promise<number | undefined> {
    if (!by) return this.touch(this.pool, tenant, sha256);
    // Under the lock (shared: submissions do not wait for each other), so a deletion sees the upload with its claim or neither.
    return inTransaction(this.pool, async (client) => {
      await client.query(`select pg_advisory_xact_lock_shared(${lockKey})`, [tenant]);
      const size = await this.touch(client, tenant, sha256);
      if (size !== undefined) await this.record(client, tenant, sha256, by);
      return size;
    });
  }

  async whileClaimed<T>(tenant: string, sha256: string, by: UploadClaimant, fn: () => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      // A session lock (not a transaction's): the claim below is committed before `fn` queues the
      // workflow, and a server killed meanwhile drops the connection, hence the lock, with it.
      await client.query(`select pg_advisory_lock_shared(${lockKey})`, [tenant]);
      try {
        if ((await this.touch(client, tenant, sha256)) === undefined) {
          throw new ManentError(
            Code.InvalidArgument,
            `no upload ${sha256} for tenant ${tenant}: it was removed (manent uploads rm, or the retention sweep) while this submission was checked; upload it again and submit again`,
            { details: { field: "artifact.source" } },
          );
        }
        await this.record(client, tenant, sha256, by);
        return await fn();
      } finally {
        await client.query(`select pg_advisory_unlock_shared(${lockKey})`, [tenant]).catch(() => {
          broken = true; // the connection, and the lock with it, is dropped rather than kept in the pool
        });
      }
    } finally {
      client.release(broken);
    }
  }

  async unclaim(id: string): Promise<void> {
    await this.pool.query("delete from manent.upload_claims where id = $1", [id]);
  }

  private async touch(client: pg.Pool | pg.PoolClient, tenant: string, sha256: string): Promise<number | undefined> {
    const r = await client.query<{ size: string }>(
      "update manent.uploads set last_used_at = now() where tenant = $1 and sha256 = $2 returning size",
      [tenant, sha256],
    );
    return r.rows[0] ? Number(r.rows[0].size) : undefined;
  }

  private async record(client: pg.PoolClient, tenant: string, sha256: string, by: UploadClaimant): Promise<void> {
    await client.query(
      `insert into manent.upload_claims (tenant, sha256, id, application, artifact, environment, version)
       values ($1, $2, $3, $4, $5, $6, $7)
       on conflict (tenant, sha256, id) do update set claimed_at = now()`,
      [tenant, sha256, by.id, by.application, by.artifact, by.environment, by.version],
    );
  }

  /** The total size of each tenant's uploads. */
  async usage(): Promise<Map<string, number>> {
    const r = await this.pool.query<{ tenant: string; bytes: string }>(
      "select tenant, sum(size) as bytes from manent.uploads group by tenant",
    );
    return new Map(r.rows.map((row) => [row.tenant, Number(row.bytes)]));
  }

  /** One tenant's uploads, newest first. */
  async list(tenant: string): Promise<UploadEntry[]> {
    const r = await this.pool.query<{ sha256: string; size: string; created_at: Date; last_used_at: Date | null }>(
      "select sha256, size, created_at, last_used_at from manent.uploads where tenant = $1 order by created_at desc, sha256",
      [tenant],
    );
    return r.rows.map((row) => ({
      sha256: row.sha256,
      size: Number(row.size),
      created_at: row.created_at.toISOString(),
      last_used_at: row.last_used_at?.toISOString() ?? null,
    }));
  }

  async put(tenant: string, sha256: string, body: Readable, limits: UploadLimits, signal?: AbortSignal): Promise<UploadResult> {
    const { maxSize, quota, declaredSize } = limits;
    const existing = await this.size(tenant, sha256);
    if (existing !== undefined) {
      body.resume();
      return { sha256, size: existing, created: false };
    }
    if (quota && declaredSize !== undefined) {
      // A declared size that cannot fit is refused before a byte is read; the exact check is at the write.
      const r = await this.pool.query<{ used: string }>("select coalesce(sum(size), 0) as used from manent.uploads where tenant = $1", [
        tenant,
      ]);
      const used = Number(r.rows[0]?.used ?? 0);
      if (used + declaredSize > quota.bytes) throw overQuota(tenant, quota, used, declaredSize);
    }
    const file = join(this.spoolDir, randomUUID());
    try {
      const hash = createHash("sha256");
      let size = 0;
      const check = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > maxSize) return done(tooLarge(maxSize));
          hash.update(chunk);
          done(null, chunk);
        },
      });
      try {
        await pipeline(body, check, createWriteStream(file, { mode: 0o600 }), ...(signal ? [{ signal }] : []));
      } catch (err) {
        body.resume(); // whatever is left of the body is read and dropped, so the client gets the answer
        throw err instanceof ManentError
          ? err
          : new ManentError(Code.InvalidArgument, `upload: the body did not arrive whole: ${(err as Error).message}`, { cause: err });
      }
      const actual = hash.digest("hex");
      if (actual !== sha256) throw hashMismatch(actual, sha256);
      return await this.store(tenant, sha256, file, size, quota);
    } finally {
      await rm(file, { force: true });
    }
  }

  /** Writes a received and verified body to the database, in one transaction, if it fits in the tenant's quota. */
  private store(tenant: string, sha256: string, file: string, size: number, quota: UploadLimits["quota"]): Promise<UploadResult> {
    return inTransaction(this.pool, async (client) => {
      await lockTenantUploads(client, tenant);
      const r = await client.query<{ used: string; present: boolean }>(
        `select coalesce(sum(size), 0) as used, bool_or(sha256 = $2) as present from manent.uploads where tenant = $1`,
        [tenant, sha256],
      );
      // Stored meanwhile by a concurrent upload of the same bytes: same content, nothing to write.
      if (r.rows[0]?.present) return { sha256, size, created: false };
      const used = Number(r.rows[0]?.used ?? 0);
      if (quota && used + size > quota.bytes) throw overQuota(tenant, quota, used, size);
      let seq = 0;
      for await (const data of createReadStream(file, { highWaterMark: chunkSize }) as AsyncIterable<Buffer>) {
        await client.query("insert into manent.upload_chunks (tenant, sha256, seq, data) values ($1, $2, $3, $4) on conflict do nothing", [
          tenant,
          sha256,
          seq++,
          data,
        ]);
      }
      const inserted = await client.query("insert into manent.uploads (tenant, sha256, size) values ($1, $2, $3) on conflict do nothing", [
        tenant,
        sha256,
        size,
      ]);
      return { sha256, size, created: inserted.rowCount === 1 };
    });
  }

  async open(tenant: string, sha256: string): Promise<Readable | undefined> {
    if ((await this.size(tenant, sha256)) === undefined) return undefined;
    const pool = this.pool;
    // One row per read: a large upload never sits in memory whole.
    async function* rows(): AsyncGenerator<Buffer> {
      for (let seq = 0; ; seq++) {
        const r = await pool.query<{ data: Buffer }>(
          "select data from manent.upload_chunks where tenant = $1 and sha256 = $2 and seq = $3",
          [tenant, sha256, seq],
        );
        if (!r.rows[0]) return;
        yield r.rows[0].data;
      }
    }
    return Readable.from(rows(), { objectMode: false });
  }
}
