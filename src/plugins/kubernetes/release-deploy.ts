import { Code, ManentError } from "../../core/errors.js";
import { targetId, TargetStatus, type Logger, type Request, type Target, type TargetOutcome } from "../../core/contract/index.js";
import { applyAll, deleteOwned } from "./apply.js";
import { loadArtifact, type ArtifactContent } from "./artifact.js";
import type { ClusterClient } from "./cluster-client.js";
import { contextOf, ownerLabels } from "./cluster-access.js";
import {
  deleteRelease,
  deleteOrphanReleases,
  readIndex,
  readRefs,
  releaseName,
  writeIndex,
  writeRelease,
  type HistoryIndex,
  type ReleaseEntry,
} from "./history.js";
import type { ReleaseContext } from "./labels.js";
import { refKey, refOf, sortForDelete, type KubeObject, type ObjectRef } from "./objects.js";
import { parseParams, type KubernetesParams } from "./params.js";
import { renderForCluster, type Rendered } from "./render.js";
import { waitForCrds, waitForRollouts } from "./rollout.js";
import { readRoute, writeRouteRules } from "./canary.js";
import { keepIgnored } from "./ignore.js";

/** What one call works with, prepared once for all its targets. */
export interface Prepared {
  params: KubernetesParams;
  ctx: ReleaseContext;
  content: ArtifactContent;
}

export async function prepare(req: Request): Promise<Prepared> {
  const params = parseParams(req.params);
  if (!req.artifact.path) {
    throw new ManentError(
      Code.FailedPrecondition,
      `kubernetes: artifact ${req.artifact.name} ${req.artifact.version} has no local path (the fetch step did not run)`,
    );
  }
  return { params, ctx: contextOf(req, params), content: await loadArtifact(req.artifact.path) };
}

export async function dryRunTarget(req: Request, prep: Prepared, t: Target, client: ClusterClient): Promise<TargetOutcome> {
  const version = await client.version();
  const r = await applied(client, await renderForCluster(client, prep.content, req, prep.params, prep.ctx, version), req);
  const index = await readIndex(client, prep.ctx, req.signal);
  const checkable = await checkOnServer(client, r, prep, index, req.signal, true);
  return {
    status: TargetStatus.Ready,
    details: {
      cluster_version: version,
      namespace: prep.params.namespace,
      objects_checked: String(checkable.length),
      objects_skipped: String(r.skipped + (r.objects.length - checkable.length)),
      // Said before the deploy: a canary's first release on this cluster is a plain deploy.
      ...(req.rollout && !index.current && { canary: "no release in service: the first release is deployed in full, its steps are gates" }),
    },
  };
}

export async function deployTarget(req: Request, prep: Prepared, t: Target, client: ClusterClient, logger: Logger): Promise<TargetOutcome> {
  const { params, ctx } = prep;
  const version = await client.version();
  const release = await renderForCluster(client, prep.content, req, params, ctx, version);
  // What is applied: the release, but with what drift.ignore (or an autoscaler) leaves to others as it is live.
  const r = await applied(client, release, req);
  const index = await readIndex(client, ctx, req.signal);
  const refs = r.objects.map(refOf);

  // A deploy the server refuses (schema, admission, RBAC, a field another manager owns) is
  // refused before anything changes, the history included: the cluster stays as it was.
  await checkOnServer(client, r, prep, index, req.signal);

  const applyOpts = { dryRun: false, force: params.force_conflicts, signal: req.signal };
  // The history lives in the environment's namespace: one this release creates comes first.
  const namespaces = r.objects.filter((o) => o.kind === "Namespace" && o.apiVersion === "v1");
  if (!index.current && namespaces.length > 0) throwFirst(await applyAll(client, namespaces, applyOpts));

  // Record the release before touching anything else: a rollback must know what this one added.
  const entry = await writeRelease(client, ctx, releaseName(ctx, release.objects), release.objects, refs, req.signal);
  await writeIndex(client, ctx, { ...index, pending: entry }, { signal: req.signal });

  const crds = r.objects.filter((o) => o.kind === "CustomResourceDefinition");
  const rest = r.objects.filter((o) => o.kind !== "CustomResourceDefinition");
  if (crds.length > 0) {
    throwFirst(await applyAll(client, crds, applyOpts));
    await waitForCrds(client, crds, params.wait_timeout, req.signal);
    for (const key of r.pendingCrdKinds) client.forget(key.split("|")[0]!);
  }
  throwFirst(await applyAll(client, rest, applyOpts));
  req.logger.info("kubernetes: objects applied, waiting for rollouts", {
    cluster: targetId(t),
    objects: r.objects.length,
    release: entry.configmap,
  });
  await waitForRollouts(client, rest, params.wait_timeout, req.signal);

  // Success: drop what the release in service had and this one no longer has, and what a
  // release that failed earlier and was never rolled back (a stale pending one) added.
  const before: ObjectRef[] = [];
  for (const old of [index.current, index.pending]) {
    if (old && old.configmap !== entry.configmap) before.push(...(await readRefs(client, ctx, old, req.signal)));
  }
  const { deleted: pruned } = await deleteOwned(client, dropped(before, refs), ownerLabels(ctx), req.signal);
  await commitHistory(client, ctx, params, index, entry, logger, req.signal);
  req.logger.info("kubernetes: release in service", { cluster: targetId(t), release: entry.configmap, pruned });
  return {
    status: TargetStatus.Deployed,
    details: {
      cluster_version: version,
      namespace: params.namespace,
      release: entry.configmap,
      objects_applied: String(r.objects.length),
      objects_pruned: String(pruned),
      objects_skipped: String(r.skipped),
    },
  };
}

/** The rendered release as a deploy applies it: {@link keepIgnored} on its objects. */
async function applied(client: ClusterClient, r: Rendered, req: Request): Promise<Rendered> {
  // A CRD's custom resources cannot be read before the CRD is applied: nothing of theirs to keep yet.
  const readable = (o: KubeObject): boolean => !r.pendingCrdKinds.has(`${o.apiVersion}|${o.kind}`);
  if (!req.ignore?.length && !r.objects.some((o) => o.kind === "HorizontalPodAutoscaler")) return r;
  const kept = await keepIgnored(client, r.objects.filter(readable), req.ignore ?? [], req.signal);
  const byObject = new Map(r.objects.filter(readable).map((o, i) => [o, kept[i]!]));
  return { ...r, objects: r.objects.map((o) => byObject.get(o) ?? o) };
}

/** Makes `entry` current, keeps `history_limit` releases and deletes the older ones. */
async function commitHistory(
  client: ClusterClient,
  ctx: ReleaseContext,
  params: KubernetesParams,
  index: HistoryIndex,
  entry: ReleaseEntry,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  const same = index.current?.configmap === entry.configmap;
  const all = [entry, ...index.releases.filter((e) => e.configmap !== entry.configmap)];
  const kept = all.slice(0, params.history_limit);
  const next: HistoryIndex = { current: entry, releases: kept };
  const previous = same ? index.previous : index.current;
  if (previous && kept.some((e) => e.configmap === previous.configmap)) next.previous = previous;
  await writeIndex(client, ctx, next, { signal });
  for (const old of all.slice(params.history_limit)) await deleteRelease(client, ctx, old, signal);
  // Release ConfigMaps no index entry names any more (a failed release's, a stale pending one).
  const orphans = await deleteOrphanReleases(client, ctx, kept, signal);
  if (orphans.error) logger.warn("kubernetes: could not sweep orphaned history ConfigMaps", { cluster: client.name, error: orphans.error });
}

/**
 * Applies every object the cluster can check now (not custom resources of a CRD this release
 * brings) with dryRun=All, and the history index too, so a token that cannot write ConfigMaps is
 * caught as well; in a dry-run, the canary's HTTPRoute too. Every refusal is reported at once. Returns the objects checked.
 */
async function checkOnServer(
  client: ClusterClient,
  r: Rendered,
  prep: Prepared,
  index: HistoryIndex,
  signal: AbortSignal,
  checkRoute = false,
): Promise<KubeObject[]> {
  const checkable = r.objects.filter((o) => !r.pendingCrdKinds.has(`${o.apiVersion}|${o.kind}`));
  const errors = await applyAll(client, checkable, { dryRun: true, force: prep.params.force_conflicts, signal, collect: true });
  try {
    await writeIndex(client, prep.ctx, index, { dryRun: true, signal });
  } catch (err) {
    const e = ManentError.from(err);
    errors.push(new ManentError(e.code, `release history: ${e.message}`, { cause: err, details: e.details }));
  }
  // A canary moves weights on the route (dry-run only): it must exist and the token must be allowed to patch it.
  const route = prep.params.traffic_route;
  if (checkRoute && route) {
    try {
      const current = await readRoute(client, prep.params.namespace, route, signal);
      await writeRouteRules(client, prep.params.namespace, route, current.spec?.rules ?? [], { dryRun: true, signal });
    } catch (err) {
      errors.push(ManentError.from(err));
    }
  }
  // A namespace the release itself creates does not exist before it is applied: a dry run cannot
  // create it, so what goes into it is checked for real when it is applied.
  const created = new Set(r.objects.filter((o) => o.kind === "Namespace" && o.apiVersion === "v1").map((o) => o.metadata.name));
  const refused = errors.filter(
    (e) => !(e.code === Code.FailedPrecondition && e.details.namespace !== undefined && created.has(e.details.namespace)),
  );
  if (refused.length > 0) {
    throw new ManentError(refused[0]!.code, refused.map((e) => e.message).join("; "), { details: refused[0]!.details });
  }
  return checkable;
}

/** Refs in `old` that `keep` does not have, in delete order. */
export function dropped(old: ObjectRef[], keep: ObjectRef[]): ObjectRef[] {
  const kept = new Set(keep.map(refKey));
  return sortForDelete(old.filter((r) => !kept.has(refKey(r))));
}

export function throwFirst(errors: ManentError[]): void {
  if (errors.length > 0) throw errors[0]!;
}
