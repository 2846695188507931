import type { Submission } from "../engine/resolve.js";
import type { RecordedRelease } from "./drift-record.js";

/**
 * A deploy of the recorded release again, with the envconfig of now: the same version and bytes
 * (the source and sha256 its deploy fetched), or, for a release a rollback made, a rollback to it.
 * What a drift heal and an envconfig change's auto-deploy submit.
 */
export function releaseAgain(release: RecordedRelease): Submission {
  const req = release.request as { descriptor?: unknown; descriptorFile?: unknown };
  const descriptorFile = typeof req.descriptorFile === "string" ? req.descriptorFile : "descriptor";
  return release.fetched
    ? {
        kind: "deploy",
        descriptor: req.descriptor,
        descriptorFile,
        overrides: {
          version: release.version,
          source: release.fetched.source,
          ...(release.fetched.sha256 && { sha256: release.fetched.sha256 }),
        },
      }
    : { kind: "rollback", descriptor: req.descriptor, descriptorFile, to: release.version };
}
