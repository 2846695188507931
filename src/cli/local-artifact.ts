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

/**
 * What `manent deploy` and `manent release start` send besides the descriptor: its local artifact
 * file, or the one `--source` names, uploaded (a file on this machine reaches the server as an
 * upload, whether the server is here or not) and replaced by the upload's source, and the
 * `--version`, `--source` and `--sha256` overrides. `absoluteSource` resolves `--source` from here.
 */
export async function artifactOverrides(
  api: () => Promise<ApiClient>,
  descriptor: Record<string, unknown>,
  file: string,
  o: { version?: string; source?: string; sha256?: string },
  absoluteSource: (source: string, base: string) => Promise<string>,
): Promise<{ version?: string; source?: string; sha256?: string }> {
  const artifact = descriptor.artifact as Record<string, unknown>;
  const tenant = typeof descriptor.tenant === "string" ? descriptor.tenant : "untenanted";
  let source = o.source === undefined ? undefined : await absoluteSource(o.source, process.cwd());
  // The signature goes with the bytes it signs: named in the descriptor, else the file beside a local artifact.
  let signatureBeside: string | undefined;
  if (source !== undefined && !isRemoteSource(source)) {
    signatureBeside = await signatureBesideOf(source);
    // The descriptor's signature is of its own artifact, not of the one --source names.
    delete artifact.signature;
    source = (await uploadLocalArtifact(await api(), tenant, source, "--source")).source;
  }
  if (source === undefined && typeof artifact.source === "string" && !isRemoteSource(artifact.source)) {
    if (artifact.signature === undefined) signatureBeside = await signatureBesideOf(artifact.source);
    artifact.source = (await uploadLocalArtifact(await api(), tenant, artifact.source, `${file}: artifact.source`)).source;
  }
  if (signatureBeside !== undefined) artifact.signature = signatureBeside;
  if (typeof artifact.signature === "string" && !isRemoteSource(artifact.signature)) {
    artifact.signature = (await uploadLocalArtifact(await api(), tenant, artifact.signature, `${file}: artifact.signature`)).source;
  }
  return {
    ...(o.version !== undefined && { version: o.version }),
    ...(source !== undefined && { source }),
    ...(o.sha256 !== undefined && { sha256: o.sha256 }),
  };
}

/** The names a signature of a local artifact may have beside it: an SSH signature, then a Sigstore bundle. */
export const signatureSuffixes = [".sig", ".sigstore.json"] as const;

/** The first signature file beside a local artifact (`<file>.sig`, `<file>.sigstore.json`), if one is there. */
async function signatureBesideOf(file: string): Promise<string | undefined> {
  for (const suffix of signatureSuffixes) {
    if ((await stat(file + suffix).catch(() => undefined))?.isFile()) return file + suffix;
  }
  return undefined;
}
