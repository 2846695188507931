import { DBOS } from "@dbos-inc/dbos-sdk";
import type { Logger } from "../contract/index.js";
import { pendingOfOtherVersions } from "../engine/version-upgrade.js";
import type { ReleaseStore } from "./release-store.js";

/**
 * Releases a server of another manent build left running, settled as engine/version-upgrade.ts
 * settles deploys: DBOS resumes a workflow only under the version that started it, and a release
 * replayed by other code could re-run a stage or lose an approval. So a release started by another
 * version on `executorIds` (this server's own past, or a dead peer's) ends `failed`, its record
 * first (a crash before the cancel leaves the workflow pending, and the next start does both again),
 * then its workflow is cancelled. The stages it passed stay `succeeded`: `manent release retry`
 * carries them over and goes on from the stage it stopped at. A live older server's releases are
 * left to it.
 */
export async function settleOtherVersionReleases(o: {
  version: string;
  workflowName: string;
  executorIds: string[];
  store: ReleaseStore;
  logger: Logger;
}): Promise<void> {
  for (const w of await pendingOfOtherVersions(o)) {
    const r = await o.store.getRelease(w.workflowID);
    if (r && r.status === "running") {
      const message =
        `manent was upgraded from ${w.applicationVersion} to ${o.version} while this release ran, and a release is resumed only ` +
        `by the version that started it: it was stopped. The stages it passed stay done; manent release retry ${r.id} goes on ` +
        `from the stage it stopped at`;
      const stages = r.stages.map((s, i) =>
        s.status === "pending"
          ? { ...s, status: "not_started" as const }
          : i + 1 === r.current_stage && !["succeeded", "failed"].includes(s.status)
            ? { ...s, status: "failed" as const, message, finished_at: new Date().toISOString() }
            : s,
      );
      // Past any revision the workflow wrote: a late write of the old workflow cannot bring it back to running.
      await o.store.saveProgress(
        r.id,
        {
          status: "failed",
          current_stage: r.current_stage,
          stages,
          waiting: null,
          error: { code: "aborted", message },
          sha256: r.sha256,
        },
        2 ** 31 - 1,
      );
    }
    await DBOS.cancelWorkflow(w.workflowID);
    o.logger.warn("release started by another manent version ended", { release: w.workflowID, was_version: w.applicationVersion });
  }
}
