import { TargetStatus, type TargetOutcome } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import * as steps from "./release-steps.js";
import { siteLabel, type TargetSite } from "./release-steps.js";
import type { CallContext } from "./site.js";
import { activateLive } from "./slot-steps.js";

/**
 * Puts one target back on `version` without copying anything: switch `current`, re-run
 * activate. `version` "" means nothing was deployed before: `current` is removed.
 */
export async function restoreTarget(call: CallContext, site: TargetSite, version: string): Promise<TargetOutcome> {
  const before = await steps.probe(site, version);
  const details = {
    release_path: version ? `${site.base}/releases/${version}` : "",
    previous_version: before.current,
    bytes_sent: "0",
  };
  if (version === "") {
    if (before.current === "") return { status: TargetStatus.Unchanged, details };
    await steps.removeCurrent(site);
    site.log.warn("rollback removed current: nothing was deployed before", {
      host: site.host,
      removed: before.current,
    });
    return {
      status: TargetStatus.RolledBack,
      details: {
        ...details,
        note: "current removed: nothing was deployed before",
      },
    };
  }
  if (!before.exists) {
    throw new ManentError(
      Code.FailedPrecondition,
      `${siteLabel(site)}: release ${version} is no longer in ${site.base}/releases; cannot roll back`,
      {
        details: { host: site.host, path: `${site.base}/releases/${version}` },
      },
    );
  }
  // The switch never happened (the deploy failed before it): nothing to undo.
  if (before.current === version) return { status: TargetStatus.Unchanged, details };
  await steps.switchCurrent(site, version);
  site.log.info("rolled back", {
    host: site.host,
    version,
    from: before.current,
  });
  await activateLive(call, site, version);
  return { status: TargetStatus.RolledBack, details };
}
