import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { gunzipSync } from "node:zlib";
import { Parser, type ReadEntry } from "tar";
import { Code, ManentError } from "../../core/errors.js";

/** What an artifact holds: manifest text (one or several files), or a Helm chart to render. */
export type ArtifactContent =
  | { kind: "manifests"; files: { name: string; text: string }[] }
  | { kind: "helm"; chartName: string; path: string; files: Map<string, Buffer> };

const manifestExt = /\.(ya?ml|json)$/i;

/**
 * Reads the verified artifact: a YAML (or JSON) manifest, a `.tar.gz` of manifests, or a Helm
 * chart packaged by `helm package` (a `.tgz` whose top folder holds `Chart.yaml`).
 */
export async function loadArtifact(path: string): Promise<ArtifactContent> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw new ManentError(Code.FailedPrecondition, `kubernetes: cannot read artifact ${path}: ${(err as Error).message}`, { cause: err });
  }
  // Named by its file name in messages: the artifact's name, not the server's cache path (the tenant's business is the former).
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return { kind: "manifests", files: [{ name: basename(path), text: bytes.toString("utf8") }] };

  const files = await untar(bytes, path);
  const chart = [...files.keys()].find((n) => /^[^/]+\/Chart\.yaml$/.test(n));
  if (chart) return { kind: "helm", chartName: chart.split("/")[0]!, path, files };

  const manifests = [...files.entries()]
    .filter(([name]) => manifestExt.test(name))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, data]) => ({ name, text: data.toString("utf8") }));
  if (manifests.length === 0) {
    throw new ManentError(Code.InvalidArgument, `kubernetes: artifact ${path} holds no .yaml, .yml or .json manifest and no Helm chart`);
  }
  return { kind: "manifests", files: manifests };
}

/** The regular files of a gzipped tar, by path without a leading `./`. */
async function untar(gz: Buffer, path: string): Promise<Map<string, Buffer>> {
  let raw: Buffer;
  try {
    raw = gunzipSync(gz);
  } catch (err) {
    throw new ManentError(Code.InvalidArgument, `kubernetes: artifact ${path} is not a valid gzip file: ${(err as Error).message}`);
  }
  const files = new Map<string, Buffer>();
  await new Promise<void>((resolve, reject) => {
    const parser = new Parser({
      strict: true,
      onReadEntry: (entry: ReadEntry) => {
        if (entry.type !== "File" && entry.type !== "OldFile") {
          entry.resume();
          return;
        }
        const chunks: Buffer[] = [];
        entry.on("data", (c: Buffer) => chunks.push(c));
        entry.on("end", () => files.set(entry.path.replace(/^\.\//, ""), Buffer.concat(chunks)));
      },
    });
    parser.on("end", resolve);
    parser.on("error", (err: Error) =>
      reject(new ManentError(Code.InvalidArgument, `kubernetes: artifact ${path} is not a valid tar archive: ${err.message}`)),
    );
    parser.end(raw);
  });
  return files;
}
