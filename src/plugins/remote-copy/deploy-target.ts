import { TargetStatus, type TargetOutcome } from "../../core/contract/index.js";
import type { ArtifactFile } from "./artifact-file.js";
import * as steps from "./release-steps.js";
import type { TargetSite } from "./release-steps.js";
import type { CallContext } from "./site.js";
import { activateLive } from "./slot-steps.js";

/**
 * Deploys the artifact to one target: upload and install unless `releases/<version>` is already
 * there (a release dir that exists is complete, and a version's bytes never change), switch
 * `current`, activate, prune. Nothing happens when the version is already current.
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
  if (before.current === version && before.exists) {
    site.log.info("release already current", { host: site.host, version });
    return { status: TargetStatus.Unchanged, details };
  }
  if (!before.exists) {
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
