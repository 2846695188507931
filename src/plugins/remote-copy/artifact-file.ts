import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { Code, ManentError } from "../../core/errors.js";
import type { Artifact } from "../../core/contract/index.js";

/** The local artifact file as the plugin ships it. */
export interface ArtifactFile {
  path: string;
  /** The name it gets in the release dir when it is not unpacked. */
  fileName: string;
  /** `.tar.gz` / `.tgz` are unpacked into the release dir; anything else is copied as is. */
  unpack: boolean;
  size: number;
  sha256: string;
}

/** Stats the verified local copy; hashes it only when the engine gave no sha256. */
export async function artifactFile(artifact: Artifact): Promise<ArtifactFile> {
  const path = artifact.path;
  if (!path) {
    throw new ManentError(Code.FailedPrecondition, `remote-copy: artifact ${artifact.name} has no local path (not fetched)`, {
      details: { plugin: "remote-copy", field: "artifact.path" },
    });
  }
  const info = await stat(path).catch((err: unknown) => {
    throw new ManentError(Code.FailedPrecondition, `remote-copy: artifact file ${path} is not readable`, { cause: err });
  });
  const fileName = basename(path);
  return {
    path,
    fileName,
    unpack: /\.(tar\.gz|tgz)$/i.test(fileName),
    size: info.size,
    sha256: artifact.sha256?.toLowerCase() ?? (await sha256File(path)),
  };
}

export function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash("sha256");
    createReadStream(path)
      .on("data", (d) => h.update(d))
      .on("error", reject)
      .on("end", () => resolve(h.digest("hex")));
  });
}
