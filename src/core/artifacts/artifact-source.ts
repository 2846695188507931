import { isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";
import { Code, ManentError } from "../errors.js";

/** Where a deploy's artifact comes from, as `artifact.source` names it. */
export type ArtifactSource =
  /** A file a client uploaded to this server (`upload:<sha256>/<file name>`). */
  | { kind: "upload"; sha256: string; fileName: string }
  /** An http(s) URL the server fetches, when manent.yml allows it. */
  | { kind: "url"; url: URL }
  /** A file on the server (absolute path or file:// URL), when manent.yml allows its directory. */
  | { kind: "path"; path: string };

export const uploadPrefix = "upload:";
const fileNamePattern = /^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,199}$/;

export function isUrl(source: string): boolean {
  return /^https?:\/\//i.test(source);
}

/** The source a client names for an uploaded file. */
export function uploadSource(sha256: string, fileName: string): string {
  return `${uploadPrefix}${sha256}/${safeFileName(fileName)}`;
}

/** A file name fit for the artifact cache and the targets: other characters become '_'. */
export function safeFileName(name: string): string {
  const cleaned = name
    .replace(/[^A-Za-z0-9._+-]/g, "_")
    .replace(/^\.+/, "_")
    .slice(0, 200);
  return cleaned || "artifact";
}

/** Parses `artifact.source`; anything else is `invalid_argument` naming the field. */
export function parseArtifactSource(source: string): ArtifactSource {
  if (source.startsWith(uploadPrefix)) {
    const m = /^upload:([0-9a-f]{64})\/(.+)$/.exec(source);
    if (!m || !fileNamePattern.test(m[2]!)) {
      throw bad(`"${clip(source)}" is not an upload reference (upload:<sha256>/<file name>, as the manent CLI writes it)`);
    }
    return { kind: "upload", sha256: m[1]!, fileName: m[2]! };
  }
  if (isUrl(source)) {
    if (!URL.canParse(source)) throw bad(`"${clip(source)}" is not a valid URL`);
    const url = new URL(source);
    if (url.username || url.password) throw bad("a URL with credentials is not accepted; give the server access another way");
    return { kind: "url", url };
  }
  if (/^file:/i.test(source)) {
    try {
      return { kind: "path", path: fileURLToPath(source) };
    } catch {
      throw bad(`"${clip(source)}" is not a valid file:// URL`);
    }
  }
  if (isAbsolute(source)) return { kind: "path", path: source };
  throw bad(
    `"${clip(source)}" is neither an http(s) URL, an absolute path on the server nor an upload; ` +
      "a file on your machine is deployed with the manent CLI, which uploads it",
  );
}

export function bad(message: string): ManentError {
  return new ManentError(Code.InvalidArgument, `artifact.source: ${message}`, { details: { field: "artifact.source" } });
}

/** Enough of a hostile string to recognize it, never all of it. */
export function clip(s: string, max = 200): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}
