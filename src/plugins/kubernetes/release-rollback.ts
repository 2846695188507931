import { Code, ManentError } from "../../core/errors.js";
import {
  targetId,
  TargetStatus,
  type RollbackRequest,
  type Target,
  type TargetOutcome,
  type TargetRelease,
} from "../../core/contract/index.js";
import { applyYielding, deleteOwned } from "./apply.js";
import { keepIgnored } from "./ignore.js";
import type { ClusterClient } from "./cluster-client.js";
import { ownerLabels, withClient } from "./cluster-access.js";
import { deleteRelease, readIndex, readRefs, readRelease, writeIndex, type HistoryIndex, type ReleaseEntry } from "./history.js";
import type { ReleaseContext } from "./labels.js";
import type { KubeObject, ObjectRef } from "./objects.js";
import type { KubernetesParams } from "./params.js";
import { dropped } from "./release-deploy.js";
import { waitForRollouts } from "./rollout.js";

export async function rollbackTarget(
  req: RollbackRequest,
  params: KubernetesParams,
  ctx: ReleaseContext,
  t: Target,
): Promise<TargetOutcome> {
  // Releases come in target order (the engine records currentRelease's answer) and name their
  // cluster by its identity (targetId); the position decides and the identity confirms, so a
  // direct caller that names two clusters on one host by the host alone still gets each its own.
  const atIndex = req.releases[req.targets.indexOf(t)];
  const recorded = atIndex?.host === targetId(t) ? atIndex : req.releases.find((r) => r.host === targetId(t));
  if (!recorded) {
    return { status: TargetStatus.Skipped, details: { reason: "no release recorded for this cluster" } };
  }
  return withClient(req, params, t, (client) => rollbackOn(client, req, params, ctx, recorded));
}

export async function rollbackOn(
  client: ClusterClient,
  req: RollbackRequest,
  params: KubernetesParams,
  ctx: ReleaseContext,
  recorded: TargetRelease,
): Promise<TargetOutcome> {
  const t = client.target;
  const index = await readIndex(client, ctx, req.signal);
  const target = recorded.version === "" ? undefined : findEntry(index, recorded);
  if (recorded.version !== "" && !target) {
    throw new ManentError(
      Code.FailedPrecondition,
      `cluster ${targetId(t)}: cannot roll back to ${recorded.version}: no such release in the history ConfigMap ${ctx.namespace}/manent-${ctx.application}-${ctx.environment}`,
    );
  }
  if (!target && !index.current && !index.pending && index.releases.length === 0) {
    // No history at all: the failed deploy was refused before it recorded anything.
    req.logger.info("kubernetes: nothing to roll back", { cluster: targetId(t) });
    return { status: TargetStatus.RolledBack, details: { version: "", release: "", objects_removed: "0" } };
  }
  // The release that failed: the one being deployed, or the one in service if it got that far.
  const failed = index.pending ?? (index.current && index.current.configmap !== target?.configmap ? index.current : undefined);

  let keep: ObjectRef[] = [];
  if (target) {
    const stored = await readRelease(client, ctx, target, req.signal);
    keep = stored.refs;
    // Without force: what the failed release changed of manent's fields goes back, and a field
    // another manager owns (a refused deploy's conflict, a `kubectl scale`) stays as it is.
    const objs: KubeObject[] = stored.objects;
    // And what drift.ignore (or an autoscaler) leaves to others stays as it is live, manent's own or not.
    for (const obj of await keepIgnored(client, objs, req.ignore ?? [], req.signal)) await applyYielding(client, obj, req.signal);
    await waitForRollouts(client, objs, params.wait_timeout, req.signal);
  }
  let removed = 0;
  let namespaceGone = false;
  if (failed && failed.configmap !== target?.configmap) {
    // Only what is still manent's: an object the failed release never got to change is not its to delete.
    const gone = dropped(await readRefs(client, ctx, failed, req.signal), keep);
    const outcome = await deleteOwned(client, gone, ownerLabels(ctx), req.signal);
    removed = outcome.deleted;
    namespaceGone = gone.some((r) => r.kind === "Namespace" && r.name === ctx.namespace && !outcome.kept.includes(r));
  }
  if (namespaceGone) {
    // The failed release had created the environment's namespace: the history went with it.
    req.logger.info("kubernetes: rolled back", {
      cluster: targetId(t),
      version: recorded.version,
      release: "",
      removed,
      namespace_deleted: ctx.namespace,
    });
    return { status: TargetStatus.RolledBack, details: { version: recorded.version, release: "", objects_removed: String(removed) } };
  }

  const releases = index.releases;
  const next: HistoryIndex = { releases };
  if (target) {
    next.current = target;
    const at = releases.findIndex((e) => e.configmap === target.configmap);
    const prev = releases[at + 1];
    if (prev) next.previous = prev;
  }
  await writeIndex(client, ctx, next, { signal: req.signal });
  // A pending release never served: its history entry goes with it.
  const pending = index.pending;
  if (pending && pending.configmap !== target?.configmap && !releases.some((e) => e.configmap === pending.configmap)) {
    await deleteRelease(client, ctx, pending, req.signal);
  }
  req.logger.info("kubernetes: rolled back", {
    cluster: targetId(t),
    version: recorded.version,
    release: target?.configmap ?? "",
    removed,
  });
  return {
    status: TargetStatus.RolledBack,
    details: { version: recorded.version, release: target?.configmap ?? "", objects_removed: String(removed) },
  };
}

function findEntry(index: HistoryIndex, recorded: TargetRelease): ReleaseEntry | undefined {
  const byName = recorded.details?.configmap;
  return (
    (byName ? index.releases.find((e) => e.configmap === byName) : undefined) ?? index.releases.find((e) => e.version === recorded.version)
  );
}
