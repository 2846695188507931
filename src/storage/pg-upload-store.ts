import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type pg from "pg";
import { hashMismatch, tooLarge, type UploadResult, type UploadStore } from "../core/artifacts/upload-store.js";
import { Code, ManentError } from "../core/errors.js";

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
];

/**
 * Uploads kept in the deploys' Postgres, so a deploy run by any server of a fleet finds the file
 * another server received. A body is written in 1 MiB rows inside one transaction, and its
 * `uploads` row is inserted last, after the sha256 and size are checked: a half-received or
 * mismatched body is rolled back whole and never visible.
 */
export class PgUploadStore implements UploadStore {
  constructor(private readonly pool: pg.Pool) {}

  async size(tenant: string, sha256: string): Promise<number | undefined> {
    const r = await this.pool.query<{ size: string }>("select size from manent.uploads where tenant = $1 and sha256 = $2", [
      tenant,
      sha256,
    ]);
    return r.rows[0] ? Number(r.rows[0].size) : undefined;
  }

  async put(tenant: string, sha256: string, body: Readable, maxSize: number, signal?: AbortSignal): Promise<UploadResult> {
    const existing = await this.size(tenant, sha256);
    if (existing !== undefined) {
      body.resume();
      return { sha256, size: existing, created: false };
    }
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query("begin");
      const hash = createHash("sha256");
      let size = 0;
      let seq = 0;
      let pending: Buffer[] = [];
      let pendingSize = 0;
      const flush = async (): Promise<void> => {
        if (pendingSize === 0) return;
        const data = Buffer.concat(pending, pendingSize);
        pending = [];
        pendingSize = 0;
        // A concurrent upload of the same bytes waits on this row, then skips it: same content.
        await client.query("insert into manent.upload_chunks (tenant, sha256, seq, data) values ($1, $2, $3, $4) on conflict do nothing", [
          tenant,
          sha256,
          seq++,
          data,
        ]);
      };
      try {
        for await (const chunk of body as AsyncIterable<Buffer>) {
          signal?.throwIfAborted();
          size += chunk.length;
          if (size > maxSize) throw tooLarge(maxSize);
          hash.update(chunk);
          pending.push(chunk);
          pendingSize += chunk.length;
          if (pendingSize >= chunkSize) await flush();
        }
      } catch (err) {
        throw err instanceof ManentError
          ? err
          : new ManentError(Code.InvalidArgument, `upload: the body did not arrive whole: ${(err as Error).message}`, { cause: err });
      }
      await flush();
      const actual = hash.digest("hex");
      if (actual !== sha256) throw hashMismatch(actual, sha256);
      const inserted = await client.query("insert into manent.uploads (tenant, sha256, size) values ($1, $2, $3) on conflict do nothing", [
        tenant,
        sha256,
        size,
      ]);
      await client.query("commit");
      return { sha256, size, created: inserted.rowCount === 1 };
    } catch (err) {
      await client.query("rollback").catch(() => {
        broken = true;
      });
      body.resume(); // whatever is left of the body is read and dropped, so the client gets the answer
      throw err;
    } finally {
      client.release(broken);
    }
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
