import { createHash, randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Code, ManentError } from "../errors.js";
import { privateDir } from "./workdir-modes.js";

export interface UploadResult {
  sha256: string;
  size: number;
  /** False when the same bytes were already uploaded by this tenant (nothing was written). */
  created: boolean;
}

/**
 * A tenant's uploaded artifacts, content-addressed: `<workdir>/uploads/<tenant>/<sha256>`, private
 * to the server's user. Storing is idempotent; the body is streamed to disk, hashed on the way and
 * kept only when its sha256 is the one the client named and its size is within the limit.
 */
export class UploadStore {
  constructor(private readonly workdir: string) {}

  path(tenant: string, sha256: string): string {
    return join(this.workdir, "uploads", tenant, sha256);
  }

  async size(tenant: string, sha256: string): Promise<number | undefined> {
    const info = await stat(this.path(tenant, sha256)).catch(() => undefined);
    return info?.isFile() ? info.size : undefined;
  }

  async put(tenant: string, sha256: string, body: Readable, maxSize: number, signal?: AbortSignal): Promise<UploadResult> {
    const existing = await this.size(tenant, sha256);
    if (existing !== undefined) return { sha256, size: existing, created: false };
    const target = this.path(tenant, sha256);
    await privateDir(join(this.workdir, "uploads", "tmp"));
    await privateDir(dirname(target));
    const tmp = join(this.workdir, "uploads", "tmp", randomUUID());
    const hash = createHash("sha256");
    let size = 0;
    const counting = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > maxSize) return done(tooLarge(maxSize));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    try {
      await pipeline(body, counting, createWriteStream(tmp, { mode: 0o600 }), ...(signal ? [{ signal }] : []));
      const actual = hash.digest("hex");
      if (actual !== sha256) {
        throw new ManentError(Code.InvalidArgument, `upload: the body's sha256 is ${actual}, not ${sha256} as the request named it`, {
          details: { field: "sha256" },
        });
      }
      await rename(tmp, target);
      return { sha256, size, created: true };
    } catch (err) {
      await rm(tmp, { force: true });
      throw err instanceof ManentError
        ? err
        : new ManentError(Code.InvalidArgument, `upload: the body did not arrive whole: ${(err as Error).message}`, { cause: err });
    }
  }
}

export function tooLarge(maxSize: number): ManentError {
  return new ManentError(Code.InvalidArgument, `upload: larger than ${maxSize} bytes (artifacts.max_upload_size in manent.yml)`, {
    details: { field: "body" },
  });
}
