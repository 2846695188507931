import { TargetStatus, type TargetOutcome } from "../../core/contract/index.js";
import type { ArtifactFile } from "./artifact-file.js";
import * as steps from "./release-steps.js";
import type { TargetSite } from "./release-steps.js";
import type { CallContext } from "./site.js";
import { activateLive } from "./slot-steps.js";
import { releaseIntact } from "./drift-target.js";

/**
 * Deploys the artifact to one target: upload and install unless `releases/<version>` is already
 * there with the files it was installed with (a version's bytes never change; files changed on the
 * host since are drift, and the release is installed again), switch `current`, activate, prune.
 * Nothing happens when the version is already current and intact.
 */
export async function deployTarget(call: CallContext, site: TargetSite, file: ArtifactFile): Promise<TargetOutcome> {
  const { params, req } = call;
  const version = req.artifact.version;
  const before = await steps.probe(site, version);
  const details = {
    release_path: `${site.base}/releases/${version}`,
    previous_version: before.current,
    bytes_sent: "0",
  };
  // A release whose files were changed on the host after install (drift) is installed again.
  const intact = before.exists && (await releaseIntact(site, version));
  if (before.current === version && intact) {
    site.log.info("release already current", { host: site.host, version });
    return { status: TargetStatus.Unchanged, details };
  }
  if (before.exists && !intact) site.log.warn("release files changed since install: installing it again", { host: site.host, version });
  if (!intact) {
    await steps.prepare(site, file.size);
    details.bytes_sent = String(await steps.upload(site, file.path, version, file.fileName));
    await steps.install(site, version, file.fileName, file.sha256, file.unpack);
  }
  await steps.switchCurrent(site, version);
  site.log.info("current switched", {
    host: site.host,
    version,
    previous: before.current,
  });
  await activateLive(call, site, version);
  const pruned = await steps.prune(site, params.keep_releases, version, before.current);
  if (pruned.length > 0)
    site.log.info("old releases deleted", {
      host: site.host,
      releases: pruned,
    });
  return { status: TargetStatus.Deployed, details };
}
