import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { chmod, mkdir, rename, rm, stat } from "node:fs/promises";
import { basename, isAbsolute, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Artifact } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";

export function isUrl(source: string): boolean {
  return /^https?:\/\//.test(source);
}

/**
 * Brings an artifact into the immutable cache `<workdir>/artifacts/<sha256>/<file>` and verifies
 * it. A cached copy is used without reading the source again when the descriptor gives the
 * sha256. A sha256 mismatch or a missing source is permanent; a network failure or a 5xx is not.
 */
export async function fetchArtifact(artifact: Artifact, workdir: string, signal: AbortSignal): Promise<Artifact> {
  const cacheRoot = join(workdir, "artifacts");
  const fileName = fileNameOf(artifact);
  if (artifact.sha256) {
    const cached = join(cacheRoot, artifact.sha256, fileName);
    if (existsSync(cached)) return { ...artifact, path: cached };
  }
  await mkdir(join(cacheRoot, "tmp"), { recursive: true });
  const tmp = join(cacheRoot, "tmp", `${randomUUID()}-${fileName}`);
  const hash = createHash("sha256");
  const hashing = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(await openSource(artifact, signal), hashing, createWriteStream(tmp, { mode: 0o600 }), { signal });
  } catch (err) {
    await rm(tmp, { force: true });
    throw ManentError.from(err, Code.Unavailable);
  }
  const actual = hash.digest("hex");
  if (artifact.sha256 && artifact.sha256 !== actual) {
    await rm(tmp, { force: true });
    throw new ManentError(
      Code.InvalidArgument,
      `artifact ${artifact.name} ${artifact.version}: sha256 mismatch: expected ${artifact.sha256}, got ${actual} (${artifact.source})`,
      { details: { field: "artifact.sha256" } },
    );
  }
  const dir = join(cacheRoot, actual);
  const path = join(dir, fileName);
  await mkdir(dir, { recursive: true });
  if (existsSync(path)) await rm(tmp, { force: true });
  else {
    await chmod(tmp, 0o444);
    await rename(tmp, path);
  }
  return { ...artifact, sha256: actual, path };
}

/** Checks at submission that a local source exists (a URL is checked when fetched). */
export async function checkArtifactSource(artifact: Artifact): Promise<void> {
  if (isUrl(artifact.source)) return;
  if (!isAbsolute(artifact.source)) {
    throw new ManentError(Code.InvalidArgument, `artifact.source: "${artifact.source}" must be an absolute path or an http(s) URL`, {
      details: { field: "artifact.source" },
    });
  }
  const info = await stat(artifact.source).catch(() => undefined);
  if (!info?.isFile()) {
    throw new ManentError(Code.InvalidArgument, `artifact.source: ${artifact.source} does not exist or is not a file`, {
      details: { field: "artifact.source" },
    });
  }
}

async function openSource(artifact: Artifact, signal: AbortSignal): Promise<Readable> {
  if (!isUrl(artifact.source)) {
    await checkArtifactSource(artifact);
    return createReadStream(artifact.source);
  }
  let response: Response;
  try {
    response = await fetch(artifact.source, { signal, redirect: "follow" });
  } catch (err) {
    throw new ManentError(Code.Unavailable, `artifact ${artifact.source}: ${(err as Error).message}`, { cause: err });
  }
  if (!response.ok || !response.body) {
    const code = response.status >= 500 || response.status === 429 ? Code.Unavailable : Code.FailedPrecondition;
    throw new ManentError(code, `artifact ${artifact.source}: HTTP ${response.status} ${response.statusText}`);
  }
  return Readable.fromWeb(response.body as import("node:stream/web").ReadableStream);
}

function fileNameOf(artifact: Artifact): string {
  const raw = isUrl(artifact.source) ? new URL(artifact.source).pathname : artifact.source;
  const name = basename(raw);
  return name && name !== "/" ? name : `${artifact.name}-${artifact.version}`;
}
