import { DBOS } from "@dbos-inc/dbos-sdk";
import type { Logger } from "../contract/index.js";
import type { DeployStore } from "./deploy-store.js";

/**
 * Deploys a server of another manent version left behind. DBOS resumes a workflow only under the
 * version that started it, because the steps of another version's code may not replay the same:
 * after an upgrade, a deploy that was in flight when the old server stopped would stay pending
 * forever and hold its application's place in the queue, and one still queued would never start.
 *
 * - A queued one has run nothing: storage/reconcile-deploys.ts stamps it with this version where
 *   it waits (one conditional update, so an old server cannot take it at the same time).
 * - A started one is not replayed: it is cancelled in DBOS (freeing its partition) and its record
 *   ends `failed`, saying its targets may be partly deployed and what to do. Only the started
 *   deploys of `executorIds` are touched (this server's own past, or a dead peer's): a live server
 *   of the old version, during a rolling upgrade, goes on with its own.
 * - A newer version's are left alone (a downgrade, or an older server of a rolling upgrade restarting):
 *   a server of that version finishes them. "Newer" is DBOS's order of application versions, the
 *   order in which servers first launched each on this database (dbos.application_versions).
 */
export async function settleOtherVersions(o: {
  version: string;
  workflowName: string;
  executorIds: string[];
  store: DeployStore;
  logger: Logger;
}): Promise<void> {
  for (const w of await pendingOfOtherVersions(o)) {
    // The record first: a crash before the cancel leaves the workflow pending, so the next start does both again.
    await o.store.setStatus(w.workflowID, "failed", {
      error: {
        code: "aborted",
        message:
          `manent was upgraded from ${w.applicationVersion} to ${o.version} while this deploy ran, and a deploy is resumed only by ` +
          `the version that started it: it was stopped, and its targets may be partly deployed. Check them with manent status, ` +
          `then deploy again or roll back`,
      },
    });
    await DBOS.cancelWorkflow(w.workflowID);
    o.logger.warn("deploy started by another manent version ended", { deploy: w.workflowID, was_version: w.applicationVersion });
  }
}

/**
 * The pending workflows named `workflowName` of `executorIds` that an older application version started (their
 * inputs not loaded: another build's may not deserialize here). Deploys and releases settle these alike.
 */
export async function pendingOfOtherVersions(o: {
  version: string;
  workflowName: string;
  executorIds: string[];
}): Promise<{ workflowID: string; applicationVersion?: string | undefined }[]> {
  const newer = await newerVersions(o.version);
  return (await pendingOfVersionsOtherThan(o)).filter((w) => !newer.has(w.applicationVersion!));
}

/**
 * Says in one line what this server leaves to newer versions: the pending deploys and releases of
 * `executorIds` that a newer build started. Nothing when there are none.
 */
export async function reportNewerWork(o: {
  version: string;
  workflowNames: Record<string, string>;
  executorIds: string[];
  logger: Logger;
}): Promise<void> {
  const newer = await newerVersions(o.version);
  if (newer.size === 0) return;
  const left: Record<string, number> = {};
  const versions = new Set<string>();
  for (const [kind, workflowName] of Object.entries(o.workflowNames)) {
    for (const w of await pendingOfVersionsOtherThan({ ...o, workflowName })) {
      if (!newer.has(w.applicationVersion!)) continue;
      left[kind] = (left[kind] ?? 0) + 1;
      versions.add(w.applicationVersion!);
    }
  }
  if (versions.size === 0) return;
  o.logger.warn(
    `this server (${o.version}) is older than the manent version that started ${Object.entries(left)
      .map(([kind, n]) => `${n} ${kind}${n === 1 ? "" : "s"}`)
      .join(" and ")} in flight (${[...versions].join(", ")}): they are left alone, and a server of that version finishes them`,
    { ...left, newer_versions: [...versions] },
  );
}

async function pendingOfVersionsOtherThan(o: {
  version: string;
  workflowName: string;
  executorIds: string[];
}): Promise<{ workflowID: string; applicationVersion?: string | undefined }[]> {
  return (
    await DBOS.listWorkflows({ workflowName: o.workflowName, status: "PENDING", executorId: o.executorIds, loadInput: false })
  ).filter((w) => w.applicationVersion !== undefined && w.applicationVersion !== o.version);
}

/** The application versions launched on this database after `version` was (none when it is the latest, or unknown). */
export async function newerVersions(version: string): Promise<Set<string>> {
  const all = await DBOS.listApplicationVersions();
  const mine = all.find((v) => v.versionName === version);
  if (!mine) return new Set();
  return new Set(all.filter((v) => v.versionTimestamp > mine.versionTimestamp).map((v) => v.versionName));
}
