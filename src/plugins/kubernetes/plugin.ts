import {
  forAllTargets,
  forEachTarget,
  targetId,
  resultOrThrow,
  type Artifact,
  type ContainerImage,
  type Deployer,
  type DriftInspector,
  type HeaderRoute,
  type HeaderRouter,
  type ImageLister,
  type RequestMirror,
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
  type TesterRouter,
  type TrafficRouter,
  type TargetDrift,
  type Target,
  type TargetRelease,
} from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { reachedAddresses } from "../reached-addresses.js";
import { loadArtifact } from "./artifact.js";
import * as canary from "./canary-steps.js";
import { contextOf, withClient } from "./cluster-access.js";
import { driftOn } from "./drift.js";
import { readIndex } from "./history.js";
import { pluginName } from "./labels.js";
import { parseParams } from "./params.js";
import { containerImages } from "./policy.js";
import { manifestFiles, manifestObjects, manifestVars, renderFiles } from "./render.js";
import { deployTarget, dryRunTarget, prepare } from "./release-deploy.js";
import { rollbackTarget } from "./release-rollback.js";

export { pluginName };

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
    HeaderRouter,
    RequestMirror,
    SlotScaler,
    DriftInspector,
    ImageLister
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
    // Header routes and mirroring are rules and filters on the route: refused here without one, so a dry-run says so.
    for (const [asked, what] of [
      [req.rollout?.headerRoutes, "has set_header_route steps, which add a header match rule"],
      [req.rollout?.mirror, "has set_mirror steps, which add a RequestMirror filter"],
    ] as const) {
      if (asked && !params.traffic_route) {
        throw new ManentError(
          Code.InvalidArgument,
          `kubernetes: param traffic_route: the envconfig's rollout.canary ${what} to a Gateway API HTTPRoute: set param traffic_route`,
          { details: { plugin: pluginName, param: "traffic_route" } },
        );
      }
    }
    // A target is the API server it reaches and the namespace: two names of one cluster would apply the same objects twice,
    // the second finding them unchanged.
    const reached = await reachedAddresses(req.targets);
    const places = new Map<string, Target>();
    for (const t of req.targets) {
      for (const address of reached.get(t.host) ?? [t.host]) {
        const place = `${address}:${t.port ?? 443}`;
        const other = places.get(place);
        if (other) {
          throw new ManentError(
            Code.InvalidArgument,
            `kubernetes: targets ${targetId(other)} and ${targetId(t)} reach the same API server (${place}) and namespace ${params.namespace}: ` +
              `they would be one target, deployed once; remove one`,
            { details: { plugin: pluginName, targets: `${targetId(other)},${targetId(t)}` } },
          );
        }
        places.set(place, t);
      }
    }
    const partial = (req.rollout?.mirrorPercents ?? []).find((p) => p !== 0 && p !== 100);
    if (partial !== undefined) throw canary.mirrorPercentError(partial, "rollout.canary.steps[].set_mirror");
    // Plain manifests can be checked completely here; a chart needs the cluster to render.
    if (req.artifact.path) {
      const content = await loadArtifact(req.artifact.path);
      if (content.kind === "manifests") manifestObjects(content, manifestVars(req, params), params);
    }
  }

  /**
   * The images the artifact runs, as they will be applied: plain manifests with their variables
   * substituted, or a chart rendered for each target cluster as the deploy renders it (the
   * cluster's version and API versions; nothing is written). The deploy renders again and applies
   * no image outside what was verified ({@link Request.verifiedImages}).
   */
  async images(req: Request): Promise<ContainerImage[]> {
    const params = parseParams(req.params);
    if (!req.artifact.path) return [];
    const content = await loadArtifact(req.artifact.path);
    if (content.kind === "manifests") return manifestFiles(content, req, params).flatMap((f) => containerImages(f.objects, f.name));
    const found: ContainerImage[][] = req.targets.map(() => []);
    // Not a target's outcome: no progress is reported for a render that changes nothing.
    const out = await forAllTargets({ ...req, progress: undefined }, (t) =>
      withClient(req, params, t, async (client) => {
        const { files } = await renderFiles(client, content, req, params, await client.version());
        found[req.targets.indexOf(t)] = files.flatMap((f) => containerImages(f.objects, `${f.name} for cluster ${targetId(t)}`));
        return {};
      }),
    );
    if (out.error) throw out.error;
    return found.flat();
  }

  async dryRun(req: Request): Promise<Result> {
    const prep = await prepare(req);
    const out = await forAllTargets(req, (t) => withClient(req, prep.params, t, (c) => dryRunTarget(req, prep, t, c)));
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  async deploy(req: Request): Promise<Result> {
    const prep = await prepare(req);
    const out = await forEachTarget(req, (t) => withClient(req, prep.params, t, (c) => deployTarget(req, prep, t, c, this.logger)));
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
        found[req.targets.indexOf(t)] = {
          host: targetId(t),
          ...(await driftOn(client, ctx, req.artifact.version, req.ignore ?? [], req.signal)),
        };
        return {};
      }),
    );
    if (out.error) throw out.error;
    return found;
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const params = parseParams(req.params);
    const ctx = contextOf(req, params);
    const out = await forAllTargets(req, (t) => rollbackTarget(req, params, ctx, t));
    return resultOrThrow({ plugin: pluginName, targets: out.targets }, out.error);
  }

  prepareSlots(req: Request): Promise<Record<string, string>> {
    return canary.prepareSlots(req);
  }

  deployCandidate(req: Request): Promise<Result> {
    return canary.deployCandidate(req, this.logger);
  }

  scaleCandidate(req: Request, weight: number): Promise<void> {
    return canary.scaleCandidate(req, weight);
  }

  setCandidateWeight(req: Request, weight: number): Promise<void> {
    return canary.setCandidateWeight(req, weight);
  }

  candidateWeight(req: Request): Promise<number> {
    return canary.candidateWeight(req);
  }

  routeTesters(req: Request): Promise<Record<string, string>> {
    return canary.routeTesters(req);
  }

  setHeaderRoute(req: Request, route: HeaderRoute | null): Promise<void> {
    return canary.setHeaderRoute(req, route);
  }

  setMirror(req: Request, percent: number): Promise<void> {
    return canary.setMirror(req, percent);
  }

  promoteCandidate(req: Request): Promise<void> {
    return canary.promoteCandidate(req, this.logger);
  }

  retirePrevious(req: Request): Promise<void> {
    return canary.retirePrevious(req);
  }

  revertCandidate(req: Request): Promise<void> {
    return canary.revertCandidate(req);
  }
}
