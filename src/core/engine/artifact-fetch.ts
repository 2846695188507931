import { createHash, randomUUID } from "node:crypto";
import { closeSync, constants, createReadStream, existsSync } from "node:fs";
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { basename, join } from "node:path";
import { addAbortSignal, type Readable } from "node:stream";
import type { ArtifactCache } from "../artifacts/artifact-cache.js";
import { ArtifactPolicy } from "../artifacts/artifact-policy.js";
import type { Network } from "../artifacts/network.js";
import { bad, parseArtifactSource, safeFileName, type ArtifactSource } from "../artifacts/artifact-source.js";
import { fetchPinned } from "../artifacts/pinned-fetch.js";
import type { UploadClaimant, UploadStore } from "../artifacts/upload-store.js";
import { privateDir } from "../artifacts/workdir-modes.js";
import type { LoadedConfig } from "../config/index.js";
import type { Artifact } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";

export { isUrl } from "../artifacts/artifact-source.js";

export interface ArtifactContext {
  config: Pick<LoadedConfig, "artifacts" | "baseDir" | "workdirPath">;
  tenant: string;
  /** Where clients' uploads are kept; without it, an `upload:` source is refused. */
  uploads?: UploadStore;
  /** The submission an `upload:` source is claimed for, until its deploy is recorded (see UploadStore.claim). */
  claim?: UploadClaimant;
  /** Name lookups and URL fetches (a test's lookup decides what names resolve to). */
  network: Network;
  /** The cache's bound, and the deploy that holds what it fetches (released when the deploy ends). */
  cache?: { cache: ArtifactCache; holder: string };
}

/**
 * Brings an artifact into the tenant's immutable cache `<workdir>/artifacts/<tenant>/<sha256>/<file>`
 * (private to the server's user) and verifies it. A cached copy is used without reading the source
 * again when the descriptor gives the sha256. A mismatch or a refused source is permanent; a
 * network failure or a 5xx is not.
 */
export async function fetchArtifact(artifact: Artifact, ctx: ArtifactContext, signal: AbortSignal): Promise<Artifact> {
  const source = parseArtifactSource(artifact.source);
  const cacheRoot = join(ctx.config.workdirPath, "artifacts", ctx.tenant);
  const fileName = fileNameOf(artifact, source);
  if (artifact.sha256) {
    const dir = join(cacheRoot, artifact.sha256);
    // Held before it is looked at: an eviction running meanwhile leaves it, or has already taken it away.
    ctx.cache?.cache.hold(ctx.cache.holder, dir);
    const cached = join(dir, fileName);
    if (existsSync(cached)) {
      await ctx.cache?.cache.touch(dir);
      return { ...artifact, path: cached };
    }
  }
  const tmpDir = join(cacheRoot, "tmp");
  const tmp = join(tmpDir, `${randomUUID()}-${fileName}`);
  const read = new SpilledRead(tmp, tmpDir);
  try {
    const input = await openSource(source, ctx, signal);
    await read.from(addAbortSignal(signal, input));
  } catch (err) {
    await read.discard();
    throw ManentError.from(err, Code.Unavailable);
  }
  const actual = read.sha256();
  if (artifact.sha256 && artifact.sha256 !== actual) {
    await read.discard();
    // The hash read is not told: it would tell a caller the hash of a file it cannot read.
    throw new ManentError(
      Code.InvalidArgument,
      `artifact ${artifact.name} ${artifact.version}: the content does not match artifact.sha256`,
      {
        details: { field: "artifact.sha256" },
      },
    );
  }
  const dir = join(cacheRoot, actual);
  const path = join(dir, fileName);
  // Held before it is looked at: once seen, no eviction takes it away until the deploy ends.
  ctx.cache?.cache.hold(ctx.cache.holder, dir);
  if (existsSync(path)) {
    // Already cached (the same content fetched again): nothing added, the cache's size is unchanged.
    await read.discard();
    await ctx.cache?.cache.touch(dir);
    return { ...artifact, sha256: actual, path };
  }
  try {
    await read.save();
  } catch (err) {
    await read.discard();
    throw ManentError.from(err, Code.Unavailable);
  }
  await privateDir(dir);
  await rename(tmp, path);
  if (ctx.cache) {
    await ctx.cache.cache.touch(dir);
    await ctx.cache.cache.added(read.bytes);
  }
  return { ...artifact, sha256: actual, path };
}

/** What a fetch keeps in memory before it writes to a temporary file (per fetch running). */
const heldBytes = 256 * 1024;

/**
 * A source read and hashed: kept in memory while it is small, so that content already cached
 * (the same file deployed again) costs no temporary file; past {@link heldBytes}, written to the
 * temporary file as it comes. {@link save} leaves it read-only in that file; {@link discard}
 * removes what was written.
 */
class SpilledRead {
  bytes = 0;
  private readonly hash = createHash("sha256");
  private held: Buffer[] = [];
  private file?: FileHandle;

  constructor(
    private readonly tmp: string,
    private readonly tmpDir: string,
  ) {}

  async from(input: Readable): Promise<void> {
    try {
      for await (const chunk of input as AsyncIterable<Buffer>) {
        this.hash.update(chunk);
        this.bytes += chunk.length;
        if (!this.file && this.bytes <= heldBytes) this.held.push(chunk);
        else await this.write([chunk]);
      }
    } finally {
      input.destroy();
    }
  }

  sha256(): string {
    return this.hash.digest("hex");
  }

  /** The content in the temporary file, owner-read-only and closed. */
  async save(): Promise<void> {
    if (!this.file) await this.write([]);
    await this.file!.chmod(0o400);
    await this.close();
  }

  async discard(): Promise<void> {
    this.held = [];
    if (!this.file) return;
    await this.close().catch(() => undefined);
    await rm(this.tmp, { force: true });
  }

  private async write(chunks: Buffer[]): Promise<void> {
    this.file ??= await createTmp(this.tmp, this.tmpDir);
    for (const chunk of [...this.held.splice(0), ...chunks]) {
      for (let at = 0; at < chunk.length;) at += (await this.file.write(chunk, at, chunk.length - at)).bytesWritten;
    }
  }

  private async close(): Promise<void> {
    const file = this.file;
    this.file = undefined;
    await file?.close();
  }
}

/**
 * Creates the temporary file a fetch writes, owner-only, never one that exists. Its directory is
 * made (private to the server's user) only when missing: the first fetch of a tenant, or after it
 * was removed under the server; not at every fetch.
 */
async function createTmp(tmp: string, tmpDir: string): Promise<FileHandle> {
  const create = () => open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    return await create();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await privateDir(tmpDir);
    return create();
  }
}

/** The cached copy of an artifact whose sha256 is known, when this server's cache holds it. */
export function cachedArtifact(artifact: Artifact, ctx: Pick<ArtifactContext, "config" | "tenant">): string | undefined {
  if (!artifact.sha256) return undefined;
  const path = join(
    ctx.config.workdirPath,
    "artifacts",
    ctx.tenant,
    artifact.sha256,
    fileNameOf(artifact, parseArtifactSource(artifact.source)),
  );
  return existsSync(path) ? path : undefined;
}

/**
 * Checks at submission, before anything is recorded, that the source is one the server may read:
 * an upload of this tenant that exists, a file under an allowed directory, or an allowed URL
 * whose host resolves only to allowed addresses (nothing is fetched yet).
 */
export async function checkArtifactSource(artifact: Artifact, ctx: ArtifactContext): Promise<void> {
  if (artifact.signature !== undefined) await checkSource(artifact.signature, ctx).catch((err: unknown) => rethrowAsSignature(err));
  await checkSource(artifact.source, ctx);
  const source = parseArtifactSource(artifact.source);
  if (source.kind === "upload" && artifact.sha256 && artifact.sha256 !== source.sha256) {
    throw new ManentError(Code.InvalidArgument, "artifact.sha256: differs from the sha256 of the upload artifact.source names", {
      details: { field: "artifact.sha256" },
    });
  }
}

async function checkSource(raw: string, ctx: ArtifactContext): Promise<void> {
  const source = parseArtifactSource(raw);
  const policy = policyOf(ctx);
  if (source.kind === "url") {
    await policy.checkUrl(source.url);
    return;
  }
  if (source.kind === "path") {
    closeSync((await policy.openPath(source.path)).fd);
    return;
  }
  // Claimed: neither a sweep nor a deletion removes an upload a submission has just named (upload-retention.ts).
  if ((await ctx.uploads?.claim(ctx.tenant, source.sha256, ctx.claim)) === undefined) {
    throw bad(
      `no upload ${source.sha256} for tenant ${ctx.tenant}: upload the file first (the manent CLI does when the source is a local file)`,
    );
  }
}

/** A signature is small: one larger than this is refused unread. */
const maxSignatureBytes = 1024 * 1024;

/**
 * Reads the signature `artifact.signature` names (an upload, an allowed server path or URL), under
 * the same rules as the artifact's source. Absent: undefined. Refusals name artifact.signature.
 */
export async function readSignature(artifact: Artifact, ctx: ArtifactContext, signal: AbortSignal): Promise<Buffer | undefined> {
  if (artifact.signature === undefined) return undefined;
  try {
    const stream = await openSource(parseArtifactSource(artifact.signature), ctx, signal);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxSignatureBytes) {
        stream.destroy();
        throw new ManentError(Code.InvalidArgument, `artifact.signature: larger than ${maxSignatureBytes} bytes: not a signature`, {
          details: { field: "artifact.signature" },
        });
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  } catch (err) {
    return rethrowAsSignature(err, Code.Unavailable);
  }
}

/** An error about the signature's source names artifact.signature, not artifact.source. */
function rethrowAsSignature(err: unknown, fallback?: Code): never {
  const e = ManentError.from(err, fallback);
  if (e.details?.field !== "artifact.source") throw e;
  throw new ManentError(e.code, e.message.replace(/^artifact\.source: /, "artifact.signature: "), {
    cause: err,
    details: { ...e.details, field: "artifact.signature" },
  });
}

async function openSource(source: ArtifactSource, ctx: ArtifactContext, signal: AbortSignal): Promise<Readable> {
  const policy = policyOf(ctx);
  if (source.kind === "url") return fetchPinned(source.url, policy, ctx.network, signal);
  if (source.kind === "path") {
    return createReadStream("", { fd: (await policy.openPath(source.path)).fd });
  }
  const upload = await ctx.uploads?.open(ctx.tenant, source.sha256);
  if (!upload) throw bad(`no upload ${source.sha256} for tenant ${ctx.tenant}`);
  return upload;
}

/** The sha256 of the upload an artifact's source names, if it names one. */
export function uploadOf(artifact: Artifact): string | undefined {
  const source = parseArtifactSource(artifact.source);
  return source.kind === "upload" ? source.sha256 : undefined;
}

function policyOf(ctx: ArtifactContext): ArtifactPolicy {
  return new ArtifactPolicy({ ...ctx.config, lookup: ctx.network.lookup });
}

function fileNameOf(artifact: Artifact, source: ArtifactSource): string {
  const raw = source.kind === "upload" ? source.fileName : source.kind === "url" ? basename(source.url.pathname) : basename(source.path);
  return raw && raw !== "/" ? safeFileName(raw) : safeFileName(`${artifact.name}-${artifact.version}`);
}
