import { Code, ManentError } from "../../core/errors.js";
import {
  forAllTargets,
  forEachTarget,
  targetId,
  resultOrThrow,
  TargetStatus,
  type Artifact,
  type Deployer,
  type DriftInspector,
  type DryRunner,
  type Logger,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type RollbackRequest,
  type Rollbacker,
  type SlotDeployer,
  type SlotScaler,
  type Target,
  type TesterRouter,
  type TrafficRouter,
  type TargetDrift,
  type TargetOutcome,
  type TargetRelease,
} from "../../core/contract/index.js";
import { applyAll, applyYielding, deleteAll, deleteOwned } from "./apply.js";
import { loadArtifact, type ArtifactContent } from "./artifact.js";
import { ClusterClient } from "./cluster-client.js";
import {
  deleteRelease,
  deleteOrphanReleases,
  readIndex,
  readRefs,
  readRelease,
  releaseName,
  writeIndex,
  writeRelease,
  type HistoryIndex,
  type ReleaseEntry,
} from "./history.js";
import { driftOn } from "./drift.js";
import { labelValue, managedBy, type ReleaseContext } from "./labels.js";
import { refKey, refOf, sortForDelete, type KubeObject, type ObjectRef } from "./objects.js";
import { parseParams, type KubernetesParams } from "./params.js";
import { manifestObjects, manifestVars, renderForCluster, type Rendered } from "./render.js";
import { waitForCrds, waitForRollouts } from "./rollout.js";
import {
  canaryReplicas,
  candidateObjects,
  listCandidates,
  replicaSplit,
  restoreStable,
  scaleStable,
  canaryName,
  recordedRules,
  recordRules,
  readRoute,
  routeRules,
  routesToCandidate,
  routeWeight,
  specReplicas,
  stableReplicas,
  testerMatch,
  writeRouteRules,
} from "./canary.js";

export const pluginName = "kubernetes";

/** What one call works with, prepared once for all its targets. */
interface Prepared {
  params: KubernetesParams;
  ctx: ReleaseContext;
  content: ArtifactContent;
}

/**
 * Deploys manifests and Helm charts to Kubernetes clusters (one target per cluster) with
 * server-side apply, waits for rollouts, and keeps the release history in ConfigMaps next to the
 * application so that a rollback needs nothing but the cluster.
 */
export class KubernetesDeployer
  implements
    Deployer,
    DryRunner,
    ReleaseInspector,
    Rollbacker,
    ParallelDeployer,
    SlotDeployer,
    TrafficRouter,
    TesterRouter,
    SlotScaler,
    DriftInspector
{
  constructor(private readonly logger: Logger) {}

  name(): string {
    return pluginName;
  }

  supports(artifact: Artifact): boolean {
    return artifact.type === "kubernetes" || artifact.type === "helm";
  }

  parallelTargets(): boolean {
    return true;
  }

  async validate(req: Request): Promise<void> {
    const params = parseParams(req.params);
    // A canary with testers needs the route RouteTesters adds its match to: refused here, so a dry-run says so.
    if (req.rollout?.testers && !params.traffic_route) {
      throw new ManentError(
        Code.InvalidArgument,
        "kubernetes: param traffic_route: the envconfig's rollout.canary.testers routes testers to the candidate through a Gateway API HTTPRoute: set param traffic_route",
        { details: { plugin: pluginName, param: "traffic_route" } },
      );
    }
    // Plain manifests can be checked completely here; a chart needs the cluster to render.
    if (req.artifact.path) {
      const content = await loadArtifact(req.artifact.path);
      if (content.kind === "manifests") manifestObjects(content, manifestVars(req, params), params);
    }
  }

  async dryRun(req: Request): Promise<Result> {
    const prep = await this.prepare(req);
    const out = await forAllTargets(req, (t) => withClient(req, prep.params, t, (c) => this.dryRunTarget(req, prep, t, c)));
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  async deploy(req: Request): Promise<Result> {
    const prep = await this.prepare(req);
    const out = await forEachTarget(req, (t) => withClient(req, prep.params, t, (c) => this.deployTarget(req, prep, t, c)));
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const releases: TargetRelease[] = new Array<TargetRelease>(req.targets.length);
    const out = await forAllTargets(req, (t) =>
      withClient(req, params, t, async (client) => {
        const index = await readIndex(client, ctx, req.signal);
        const cur = index.current;
        releases[req.targets.indexOf(t)] = {
          host: targetId(t),
          version: cur?.version ?? "",
          ...(cur ? { details: { configmap: cur.configmap, namespace: ctx.namespace, artifact: cur.artifact } } : {}),
        };
        return {};
      }),
    );
    if (out.error) throw out.error;
    return releases;
  }

  /** Per cluster: the release in service against `req.artifact.version`, and its objects against the live ones (server-side dry-run apply). */
  async drift(req: Request): Promise<TargetDrift[]> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const found: TargetDrift[] = new Array<TargetDrift>(req.targets.length);
    const out = await forAllTargets(req, (t) =>
      withClient(req, params, t, async (client) => {
        found[req.targets.indexOf(t)] = { host: targetId(t), ...(await driftOn(client, ctx, req.artifact.version, req.signal)) };
        return {};
      }),
    );
    if (out.error) throw out.error;
    return found;
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const out = await forAllTargets(req, (t) => this.rollbackTarget(req, params, ctx, t));
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  /** Records, per cluster, the stable Deployments' replicas and the release in service; checks the route. */
  async prepareSlots(req: Request): Promise<Record<string, string>> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const state: Record<string, string> = { namespace: params.namespace, route: params.traffic_route ?? "" };
    const out = await forAllTargets(req, (t) =>
      withClient(req, params, t, async (client) => {
        const index = await readIndex(client, ctx, req.signal);
        state[`stable_version/${clusterKey(t)}`] = index.current?.version ?? "";
        for (const [name, n] of await stableReplicas(client, params.namespace, selectorOf(ctx), req.signal))
          state[`replicas/${clusterKey(t)}/${name}`] = String(n);
        if (params.traffic_route) {
          // The route's rules as they are, so that the end of the canary puts back exactly these weights.
          const route = await readRoute(client, params.namespace, params.traffic_route, req.signal);
          state[`route_rules/${clusterKey(t)}`] = recordRules(
            route.spec?.rules ?? [],
            await this.stableServices(req, await this.prepare(req), client),
          );
        }
        return {};
      }),
    );
    if (out.error) throw out.error;
    return state;
  }

  /**
   * Applies the candidate Deployments (and Services, with a route) beside the stable ones and waits
   * for them. A cluster with no release in service has nothing to compare the candidate with, nor a
   * stable Service to weight: the release is deployed there as a plain deploy, and the later calls
   * leave that cluster alone, but for RevertCandidate, which removes the release.
   */
  async deployCandidate(req: Request): Promise<Result> {
    const prep = await this.prepare(req);
    const out = await forEachTarget(req, (t) =>
      withClient(req, prep.params, t, async (client): Promise<TargetOutcome> => {
        if (firstRelease(req, t)) {
          req.logger.info("kubernetes: no release in service: the first release is deployed in full, not as a candidate", {
            cluster: targetId(t),
          });
          const deployed = await this.deployTarget(req, prep, t, client);
          return { ...deployed, details: { ...(deployed.details ?? {}), first_release: "true" } };
        }
        const cands = await this.candidates(req, prep, client, 0, true);
        req.logger.info("kubernetes: candidate applied, waiting for it", {
          cluster: targetId(t),
          objects: cands.map((o) => `${o.kind}/${o.metadata.name}`),
        });
        return {
          status: TargetStatus.Deployed,
          details: { namespace: prep.params.namespace, candidates: cands.map((o) => `${o.kind}/${o.metadata.name}`).join(",") },
        };
      }),
    );
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  /** Candidate replicas in proportion to the weight (at least one with a route, for testers). */
  async scaleCandidate(req: Request, weight: number): Promise<void> {
    const prep = await this.prepare(req);
    const out = await forAllTargets(req, (t) =>
      withClient(req, prep.params, t, async (client) => {
        if (firstRelease(req, t)) return {};
        if (prep.params.traffic_route) {
          // At weight 0 nothing is asked of the candidate: a revert must not wait on (or fail with) a candidate that never became ready.
          await this.candidates(req, prep, client, weight, weight > 0);
          return {};
        }
        await this.divideReplicas(req, prep, client, weight);
        return {};
      }),
    );
    if (out.error) throw out.error;
  }

  /** With a route: the candidate Services get `weight`, the stable ones `100 - weight`. Without: the weight is the replicas' (scaleCandidate). */
  async setCandidateWeight(req: Request, weight: number): Promise<void> {
    const prep = await this.prepare(req);
    const route = prep.params.traffic_route;
    if (!route) return;
    const out = await forAllTargets(req, (t) =>
      withClient(req, prep.params, t, async (client) => {
        // No stable Service to weight against: the first release has all of the route already.
        if (firstRelease(req, t)) return {};
        const services = await this.stableServices(req, prep, client);
        const current = await readRoute(client, prep.params.namespace, route, req.signal);
        const rules = routeRules(current.spec?.rules ?? [], services, weight, {
          keepCandidate: true,
          testers: undefined,
          recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(t)}`]),
        });
        await writeRouteRules(client, prep.params.namespace, route, rules, { signal: req.signal });
        req.logger.info("kubernetes: route weights set", { cluster: targetId(t), route, candidate_weight: weight });
        return {};
      }),
    );
    if (out.error) throw out.error;
  }

  async candidateWeight(req: Request): Promise<number> {
    const prep = await this.prepare(req);
    const t = req.targets[0];
    if (!t) return 0;
    if (firstRelease(req, t)) return 100;
    return withClient(req, prep.params, t, async (client) => {
      if (prep.params.traffic_route) {
        const route = await readRoute(client, prep.params.namespace, prep.params.traffic_route, req.signal);
        return routeWeight(route.spec?.rules ?? [], await this.stableServices(req, prep, client));
      }
      // The candidate's share of the pods behind the stable Service (see replicaSplit).
      const cands = (await listCandidates(client, prep.params.namespace, selectorOf(prep.ctx), req.signal)).filter(
        (o) => o.kind === "Deployment",
      );
      const first = cands[0];
      if (!first) return 0;
      const stable = await client.get(
        "apps/v1",
        "Deployment",
        prep.params.namespace,
        first.metadata.name.replace(/-canary$/, ""),
        req.signal,
      );
      const c = specReplicas(first);
      const all = c + (stable ? specReplicas(stable) : 0);
      return all === 0 ? 0 : Math.round((100 * c) / all);
    });
  }

  /** A rule first on the route: requests with the tester header go to the candidate Services only. */
  async routeTesters(req: Request): Promise<Record<string, string>> {
    const prep = await this.prepare(req);
    const route = prep.params.traffic_route;
    if (!route) {
      throw new ManentError(
        Code.FailedPrecondition,
        "kubernetes: testers need a route: set param traffic_route (a Gateway API HTTPRoute)",
        { details: { param: "traffic_route" } },
      );
    }
    const header = testerMatch(prep.params.tester_header);
    const out = await forAllTargets(req, (t) =>
      withClient(req, prep.params, t, async (client) => {
        // The first release serves every request, testers' included.
        if (firstRelease(req, t)) return {};
        const services = await this.stableServices(req, prep, client);
        const current = await readRoute(client, prep.params.namespace, route, req.signal);
        const rules = current.spec?.rules ?? [];
        const next = routeRules(rules, services, routeWeight(rules, services), {
          keepCandidate: true,
          testers: header,
          recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(t)}`]),
        });
        await writeRouteRules(client, prep.params.namespace, route, next, { signal: req.signal });
        return {};
      }),
    );
    if (out.error) throw out.error;
    return { route, header: `${header.name}: ${header.value}` };
  }

  /** The candidate's spec becomes the stable one (a normal deploy: apply, wait, history), then traffic moves back and the candidate goes. */
  async promoteCandidate(req: Request): Promise<void> {
    const prep = await this.prepare(req);
    const out = await forEachTarget(req, (t) =>
      withClient(req, prep.params, t, async (client) => {
        // A first release is in service since DeployCandidate.
        if (firstRelease(req, t)) return { status: TargetStatus.Unchanged };
        // Without a route the stable Deployments were scaled down: their replicas back first, and
        // manent-canary's claim on them dropped, so that the release's apply owns them again.
        if (!prep.params.traffic_route) await this.restoreStables(req, prep.params, client, false);
        const result = await this.deployTarget(req, prep, t, client);
        await this.removeCandidate(req, prep.params, prep.ctx, client, false);
        return result;
      }),
    );
    if (out.error) throw out.error;
  }

  /** Nothing left to retire: the promote's rollout replaced the previous pods. */
  async retirePrevious(_req: Request): Promise<void> {}

  /** Weight back to the stable Services, tester rule and candidate objects removed; a first release removed as a rollback to nothing does. */
  async revertCandidate(req: Request): Promise<void> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const out = await forAllTargets(req, (t) =>
      withClient(req, params, t, async (client) => {
        if (firstRelease(req, t)) {
          const none = { host: targetId(t), version: "" };
          await this.rollbackOn(client, { ...req, releases: [none] }, params, ctx, none);
          return {};
        }
        await this.removeCandidate(req, params, ctx, client, true);
        return {};
      }),
    );
    if (out.error) throw out.error;
  }

  /** Renders the release and applies its candidates with replicas for `weight`; with `wait`, until they have rolled out. */
  private async candidates(req: Request, prep: Prepared, client: ClusterClient, weight: number, wait: boolean): Promise<KubeObject[]> {
    const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
    const withRoute = Boolean(prep.params.traffic_route);
    const cands = candidateObjects(r.objects, withRoute, (o) => {
      const n = this.recordedReplicas(req, client, o);
      return withRoute ? canaryReplicas(n, weight) : replicaSplit(n, weight).candidate;
    });
    if (!cands.some((o) => o.kind === "Deployment")) {
      throw new ManentError(
        Code.FailedPrecondition,
        `kubernetes: release ${req.artifact.version} has no Deployment: nothing to run as a candidate`,
      );
    }
    // The candidates are manent's own objects: force, as a rollback does.
    throwFirst(await applyAll(client, cands, { dryRun: false, force: true, signal: req.signal }));
    if (wait) await waitForRollouts(client, cands, prep.params.wait_timeout, req.signal);
    return cands;
  }

  /** The stable Deployment's replicas PrepareSlots recorded (else the manifest's). */
  private recordedReplicas(req: Request, client: ClusterClient, stable: KubeObject): number {
    const recorded = req.traffic?.[`replicas/${clusterKey(client.target)}/${stable.metadata.name}`];
    return recorded === undefined ? specReplicas(stable) : Number(recorded);
  }

  /**
   * Without a route: the recorded pods of each stable Deployment divided between it and its
   * candidate ({@link replicaSplit}), so the candidate's share of the stable Service's endpoints is
   * the weight. The side that grows goes first and is waited for, then the other shrinks: capacity
   * never drops below what was recorded.
   */
  private async divideReplicas(req: Request, prep: Prepared, client: ClusterClient, weight: number): Promise<void> {
    const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
    const stables = r.objects.filter((o) => o.apiVersion === "apps/v1" && o.kind === "Deployment");
    const first = stables[0];
    if (!first) return;
    const live = await client.get("apps/v1", "Deployment", prep.params.namespace, canaryName(first.metadata.name), req.signal);
    const up = replicaSplit(this.recordedReplicas(req, client, first), weight).candidate >= (live ? specReplicas(live) : 0);
    const scaleStables = async () => {
      for (const o of stables) {
        const stable = replicaSplit(this.recordedReplicas(req, client, o), weight).stable;
        await scaleStable(client, prep.params.namespace, o.metadata.name, stable, req.signal);
      }
      await waitForRollouts(client, stables, prep.params.wait_timeout, req.signal);
    };
    if (!up) await scaleStables();
    // At weight 0 nothing is asked of the candidate: a revert must not wait on (or fail with) a candidate that never became ready.
    await this.candidates(req, prep, client, weight, weight > 0);
    if (up) await scaleStables();
    req.logger.info("kubernetes: replicas divided", { cluster: targetId(client.target), candidate_weight: weight });
  }

  /** Gives the stable Deployments the replicas PrepareSlots recorded (see restoreStable); with `wait`, until they have rolled out. */
  private async restoreStables(req: Request, params: KubernetesParams, client: ClusterClient, wait: boolean): Promise<void> {
    const prefix = `replicas/${clusterKey(client.target)}/`;
    const restored: KubeObject[] = [];
    for (const [k, v] of Object.entries(req.traffic ?? {})) {
      if (!k.startsWith(prefix)) continue;
      const name = k.slice(prefix.length);
      if (await restoreStable(client, params.namespace, name, Number(v), req.signal))
        restored.push({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name, namespace: params.namespace } });
    }
    if (wait) await waitForRollouts(client, restored, params.wait_timeout, req.signal);
  }

  private async stableServices(req: Request, prep: Prepared, client: ClusterClient): Promise<Set<string>> {
    const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
    return new Set(r.objects.filter((o) => o.apiVersion === "v1" && o.kind === "Service").map((o) => o.metadata.name));
  }

  /** The route back to its recorded rules (no candidate refs, no tester rule), or the stable replicas back without one; candidate objects deleted. */
  private async removeCandidate(
    req: Request,
    params: KubernetesParams,
    ctx: ReleaseContext,
    client: ClusterClient,
    restoreStables: boolean,
  ): Promise<void> {
    const cands = await listCandidates(client, params.namespace, selectorOf(ctx), req.signal);
    // After a promote the release's apply gave the stable Deployments their (new) replicas.
    if (!params.traffic_route && restoreStables) {
      // The stable pods back before the candidate's go; the candidate goes even when they do not come back.
      const failed = await this.restoreStables(req, params, client, true).then(
        () => undefined,
        (err: unknown) => ManentError.from(err),
      );
      if (failed) {
        await deleteAll(client, sortForDelete(cands.map(refOf)), req.signal);
        throw failed;
      }
    }
    if (params.traffic_route) {
      const services = new Set(cands.filter((o) => o.kind === "Service").map((o) => o.metadata.name.replace(/-canary$/, "")));
      const current = await readRoute(client, params.namespace, params.traffic_route, req.signal);
      // A route that sends nothing to the candidate is left alone: a token that may not patch it must not keep the candidate behind.
      if (routesToCandidate(current.spec?.rules ?? [], services)) {
        const rules = routeRules(current.spec?.rules ?? [], services, 0, {
          keepCandidate: false,
          testers: null,
          recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(client.target)}`]),
        });
        await writeRouteRules(client, params.namespace, params.traffic_route, rules, { signal: req.signal });
      }
    }
    await deleteAll(client, sortForDelete(cands.map(refOf)), req.signal);
    req.logger.info("kubernetes: candidate removed", { cluster: client.name, objects: cands.length });
  }

  private async prepare(req: Request): Promise<Prepared> {
    const params = parseParams(req.params);
    if (!req.artifact.path) {
      throw new ManentError(
        Code.FailedPrecondition,
        `kubernetes: artifact ${req.artifact.name} ${req.artifact.version} has no local path (the fetch step did not run)`,
      );
    }
    return { params, ctx: contextOf(req, params), content: await loadArtifact(req.artifact.path) };
  }

  private async dryRunTarget(req: Request, prep: Prepared, t: Target, client: ClusterClient): Promise<TargetOutcome> {
    const version = await client.version();
    const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, version);
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
        ...(req.rollout &&
          !index.current && { canary: "no release in service: the first release is deployed in full, its steps are gates" }),
      },
    };
  }

  private async deployTarget(req: Request, prep: Prepared, t: Target, client: ClusterClient): Promise<TargetOutcome> {
    const { params, ctx } = prep;
    const version = await client.version();
    const r = await renderForCluster(client, prep.content, req, params, ctx, version);
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
    const entry = await writeRelease(client, ctx, releaseName(ctx, r.objects), r.objects, refs, req.signal);
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
    await this.commitHistory(client, ctx, params, index, entry, req.signal);
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

  /** Makes `entry` current, keeps `history_limit` releases and deletes the older ones. */
  private async commitHistory(
    client: ClusterClient,
    ctx: ReleaseContext,
    params: KubernetesParams,
    index: HistoryIndex,
    entry: ReleaseEntry,
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
    if (orphans.error)
      this.logger.warn("kubernetes: could not sweep orphaned history ConfigMaps", { cluster: client.name, error: orphans.error });
  }

  private async rollbackTarget(req: RollbackRequest, params: KubernetesParams, ctx: ReleaseContext, t: Target): Promise<TargetOutcome> {
    // Releases come in target order (the engine records currentRelease's answer) and name their
    // cluster by its identity (targetId); the position decides and the identity confirms, so a
    // direct caller that names two clusters on one host by the host alone still gets each its own.
    const atIndex = req.releases[req.targets.indexOf(t)];
    const recorded = atIndex?.host === targetId(t) ? atIndex : req.releases.find((r) => r.host === targetId(t));
    if (!recorded) {
      return { status: TargetStatus.Skipped, details: { reason: "no release recorded for this cluster" } };
    }
    return withClient(req, params, t, (client) => this.rollbackOn(client, req, params, ctx, recorded));
  }

  private async rollbackOn(
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
      for (const obj of objs) await applyYielding(client, obj, req.signal);
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

/**
 * Whether the cluster had no release in service when the canary began (PrepareSlots recorded an
 * empty stable version): its candidate is the release itself, deployed in full.
 */
function firstRelease(req: Request, t: Target): boolean {
  return req.traffic?.[`stable_version/${clusterKey(t)}`] === "";
}

/** A cluster in the rollout state: host and port, as two clusters may share a host. */
function clusterKey(t: Target): string {
  return `${t.host}:${t.port ?? 443}`;
}

/** The label selector of this application's objects in this environment. */
function selectorOf(ctx: ReleaseContext): string {
  return `manent.io/application=${labelValue(ctx.application)},manent.io/environment=${labelValue(ctx.environment)}`;
}

function contextOf(req: Request, params: KubernetesParams): ReleaseContext {
  return {
    tenant: req.tenant,
    application: req.application,
    environment: req.environment,
    artifact: req.artifact.name,
    version: req.artifact.version,
    namespace: params.namespace,
  };
}

/**
 * Runs `fn` with a client for cluster `t`, closing its connections afterwards. Each cluster may
 * have its own service account and CA: the target's labels `token_secret` / `ca_secret` name its
 * secrets, the params' are the default.
 */
async function withClient<T>(req: Request, params: KubernetesParams, t: Target, fn: (c: ClusterClient) => Promise<T>): Promise<T> {
  const caSecret = t.labels.ca_secret ?? params.ca_secret;
  const tokenSecret = t.labels.token_secret ?? params.token_secret;
  const token = (await readSecret(req, tokenSecret, t.labels.token_secret ? "target label token_secret" : "param token_secret")).trim();
  if (token === "") {
    throw new ManentError(
      Code.FailedPrecondition,
      `kubernetes: cluster ${targetId(t)}: secret "${tokenSecret}" (the service account token) is empty: put the token Secret's token in it`,
      {
        details: { secret: tokenSecret },
      },
    );
  }
  const ca = caSecret ? await readSecret(req, caSecret, t.labels.ca_secret ? "target label ca_secret" : "param ca_secret") : undefined;
  const client = new ClusterClient(t, token, ca);
  try {
    return await fn(client);
  } catch (err) {
    if (err instanceof ManentError && err.code === Code.Unauthenticated) {
      // 401: the server knows no such token. A retry sends the same token.
      throw new ManentError(
        Code.Unauthenticated,
        `kubernetes: cluster ${targetId(t)}: the API server refused the token in secret "${tokenSecret}" (401 Unauthorized): it is wrong, expired, revoked or another cluster's`,
        {
          cause: err,
          details: { secret: tokenSecret },
        },
      );
    }
    throw err;
  } finally {
    client.close();
  }
}

/** A secret the params name; one the envconfig does not declare is a permanent error naming the param. */
async function readSecret(req: Request, name: string, by: string): Promise<string> {
  try {
    return await req.secrets.secret(name);
  } catch (err) {
    const e = ManentError.from(err);
    // Not declared (not_found) cannot change between two retries of the same deploy.
    const code = e.code === Code.NotFound ? Code.FailedPrecondition : e.code;
    throw new ManentError(
      code,
      `kubernetes: secret "${name}" (${by}): ${e.message}${e.code === Code.NotFound ? " (declare it under secrets: in the envconfig)" : ""}`,
      {
        cause: err,
        details: { ...e.details, secret: name },
      },
    );
  }
}

/** The labels that make an object manent's for this application and environment. */
function ownerLabels(ctx: ReleaseContext): Record<string, string> {
  return {
    "app.kubernetes.io/managed-by": managedBy,
    "manent.io/application": labelValue(ctx.application),
    "manent.io/environment": labelValue(ctx.environment),
  };
}

function findEntry(index: HistoryIndex, recorded: TargetRelease): ReleaseEntry | undefined {
  const byName = recorded.details?.configmap;
  return (
    (byName ? index.releases.find((e) => e.configmap === byName) : undefined) ?? index.releases.find((e) => e.version === recorded.version)
  );
}

/** Refs in `old` that `keep` does not have, in delete order. */
function dropped(old: ObjectRef[], keep: ObjectRef[]): ObjectRef[] {
  const kept = new Set(keep.map(refKey));
  return sortForDelete(old.filter((r) => !kept.has(refKey(r))));
}

function throwFirst(errors: ManentError[]): void {
  if (errors.length > 0) throw errors[0]!;
}
