import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { pipeline } from "node:stream/promises";
import { isUrl, uploadPrefix, uploadSource } from "../core/artifacts/artifact-source.js";
import { Code, ManentError } from "../core/errors.js";
import type { ApiClient } from "./api-client.js";

/** True for a source the server reads itself (URL, server path as file://, upload); false for a file here. */
export function isRemoteSource(source: string): boolean {
  return isUrl(source) || source.startsWith(uploadPrefix) || /^file:/i.test(source);
}

/**
 * Uploads a local artifact (unless the server has these bytes already) and returns the source that
 * names the upload. The file is hashed here, then streamed: neither side holds it in memory.
 */
export async function uploadLocalArtifact(
  api: ApiClient,
  tenant: string,
  file: string,
  field: string,
): Promise<{ source: string; sha256: string }> {
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile())
    throw new ManentError(Code.InvalidArgument, `${field}: ${file} does not exist or is not a file`, { details: { field } });
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  const sha256 = hash.digest("hex");
  if ((await api.uploaded(tenant, sha256)) === undefined) await api.upload(tenant, sha256, file, info.size);
  return { source: uploadSource(sha256, basename(file)), sha256 };
}
