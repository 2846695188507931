import { Code, ManentError } from "../../core/errors.js";
import {
  forAllTargets,
  forEachTarget,
  targetId,
  resultOrThrow,
  TargetStatus,
  type HeaderRoute,
  type Logger,
  type Request,
  type Result,
  type Target,
  type TargetOutcome,
} from "../../core/contract/index.js";
import { applyAll, deleteAll } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
import { clusterKey, contextOf, selectorOf, withClient } from "./cluster-access.js";
import { readIndex } from "./history.js";
import { pluginName, type ReleaseContext } from "./labels.js";
import { refOf, sortForDelete, type KubeObject } from "./objects.js";
import { parseParams, type KubernetesParams } from "./params.js";
import { renderForCluster } from "./render.js";
import { deployTarget, prepare, throwFirst, type Prepared } from "./release-deploy.js";
import { rollbackOn } from "./release-rollback.js";
import { waitForRollouts } from "./rollout.js";
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

/*
 * The steps of a canary (the SlotDeployer, TrafficRouter, TesterRouter and SlotScaler calls of the
 * kubernetes plugin): candidates beside the stable Deployments, weights on the route or in the
 * replicas, and the promote or revert; canary.ts holds the object and route arithmetic they use.
 */

/** Records, per cluster, the stable Deployments' replicas and the release in service; checks the route. */
export async function prepareSlots(req: Request): Promise<Record<string, string>> {
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
        state[`route_rules/${clusterKey(t)}`] = recordRules(route.spec?.rules ?? [], await stableServices(req, await prepare(req), client));
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
export async function deployCandidate(req: Request, logger: Logger): Promise<Result> {
  const prep = await prepare(req);
  const out = await forEachTarget(req, (t) =>
    withClient(req, prep.params, t, async (client): Promise<TargetOutcome> => {
      if (firstRelease(req, t)) {
        req.logger.info("kubernetes: no release in service: the first release is deployed in full, not as a candidate", {
          cluster: targetId(t),
        });
        const deployed = await deployTarget(req, prep, t, client, logger);
        return { ...deployed, details: { ...(deployed.details ?? {}), first_release: "true" } };
      }
      const cands = await candidates(req, prep, client, 0, true);
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
export async function scaleCandidate(req: Request, weight: number): Promise<void> {
  const prep = await prepare(req);
  const out = await forAllTargets(req, (t) =>
    withClient(req, prep.params, t, async (client) => {
      if (firstRelease(req, t)) return {};
      if (prep.params.traffic_route) {
        // At weight 0 nothing is asked of the candidate: a revert must not wait on (or fail with) a candidate that never became ready.
        await candidates(req, prep, client, weight, weight > 0);
        return {};
      }
      await divideReplicas(req, prep, client, weight);
      return {};
    }),
  );
  if (out.error) throw out.error;
}

/** With a route: the candidate Services get `weight`, the stable ones `100 - weight`. Without: the weight is the replicas' (scaleCandidate). */
export async function setCandidateWeight(req: Request, weight: number): Promise<void> {
  const prep = await prepare(req);
  const route = prep.params.traffic_route;
  if (!route) return;
  const out = await forAllTargets(req, (t) =>
    withClient(req, prep.params, t, async (client) => {
      // No stable Service to weight against: the first release has all of the route already.
      if (firstRelease(req, t)) return {};
      const services = await stableServices(req, prep, client);
      const current = await readRoute(client, prep.params.namespace, route, req.signal);
      const rules = routeRules(current.spec?.rules ?? [], services, weight, {
        keepCandidate: true,
        tester: testerMatch(prep.params.tester_header),
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

export async function candidateWeight(req: Request): Promise<number> {
  const prep = await prepare(req);
  const t = req.targets[0];
  if (!t) return 0;
  if (firstRelease(req, t)) return 100;
  return withClient(req, prep.params, t, async (client) => {
    if (prep.params.traffic_route) {
      const route = await readRoute(client, prep.params.namespace, prep.params.traffic_route, req.signal);
      return routeWeight(route.spec?.rules ?? [], await stableServices(req, prep, client));
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
export async function routeTesters(req: Request): Promise<Record<string, string>> {
  const prep = await prepare(req);
  const route = prep.params.traffic_route;
  if (!route) {
    throw new ManentError(Code.FailedPrecondition, "kubernetes: testers need a route: set param traffic_route (a Gateway API HTTPRoute)", {
      details: { param: "traffic_route" },
    });
  }
  const header = testerMatch(prep.params.tester_header);
  const out = await forAllTargets(req, (t) =>
    withClient(req, prep.params, t, async (client) => {
      // The first release serves every request, testers' included.
      if (firstRelease(req, t)) return {};
      const services = await stableServices(req, prep, client);
      const current = await readRoute(client, prep.params.namespace, route, req.signal);
      const rules = current.spec?.rules ?? [];
      const next = routeRules(rules, services, routeWeight(rules, services), {
        keepCandidate: true,
        tester: header,
        testers: true,
        recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(t)}`]),
      });
      await writeRouteRules(client, prep.params.namespace, route, next, { signal: req.signal });
      return {};
    }),
  );
  if (out.error) throw out.error;
  return { route, header: `${header.name}: ${header.value}` };
}

/** A `set_header_route` step: the rule sending the header's (or cookie's) requests to the candidate Services, put before the weighted rules; null removes it. */
export async function setHeaderRoute(req: Request, headerRoute: HeaderRoute | null): Promise<void> {
  await rewriteRoute(req, "set_header_route", { headerRoute });
  req.logger.info("kubernetes: header route set", {
    route: req.params["traffic_route"],
    match: headerRoute ? `${headerRoute.type} ${headerRoute.name}=${headerRoute.value}` : "off",
  });
}

/**
 * A `set_mirror` step: a RequestMirror filter on each rule with a stable Service, copying its
 * requests to the candidate (0 removes it). The standard channel's HTTPRoute has no percentage
 * on RequestMirror, so only 100 and 0 can be done (validate refuses the others).
 */
export async function setMirror(req: Request, percent: number): Promise<void> {
  if (percent !== 0 && percent !== 100) throw mirrorPercentError(percent);
  await rewriteRoute(req, "set_mirror", { mirror: percent === 100 });
  req.logger.info("kubernetes: mirror set", { route: req.params["traffic_route"], percent });
}

/** Why a mirror percentage other than 0 or 100 cannot be done (validate and SetMirror). */
export function mirrorPercentError(percent: number, field = "set_mirror"): ManentError {
  return new ManentError(
    Code.Unimplemented,
    `kubernetes: ${field}: ${percent}: the Gateway API HTTPRoute's RequestMirror filter (standard channel CRDs) has no percent or fraction: only set_mirror 100 (mirror every request) and 0 (stop) are supported`,
    { details: { plugin: pluginName, field } },
  );
}

/** Rewrites the route of every cluster with the candidate's weight as it is, changing only what `change` says. */
async function rewriteRoute(req: Request, step: string, change: { headerRoute?: HeaderRoute | null; mirror?: boolean }): Promise<void> {
  const prep = await prepare(req);
  const route = prep.params.traffic_route;
  if (!route) {
    throw new ManentError(Code.FailedPrecondition, `kubernetes: ${step} needs a route: set param traffic_route (a Gateway API HTTPRoute)`, {
      details: { param: "traffic_route" },
    });
  }
  const out = await forAllTargets(req, (t) =>
    withClient(req, prep.params, t, async (client) => {
      // The first release serves every request already.
      if (firstRelease(req, t)) return {};
      const services = await stableServices(req, prep, client);
      const current = await readRoute(client, prep.params.namespace, route, req.signal);
      const rules = current.spec?.rules ?? [];
      const next = routeRules(rules, services, routeWeight(rules, services), {
        keepCandidate: true,
        tester: testerMatch(prep.params.tester_header),
        testers: undefined,
        ...change,
        recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(t)}`]),
      });
      await writeRouteRules(client, prep.params.namespace, route, next, { signal: req.signal });
      return {};
    }),
  );
  if (out.error) throw out.error;
}

/** The candidate's spec becomes the stable one (a normal deploy: apply, wait, history), then traffic moves back and the candidate goes. */
export async function promoteCandidate(req: Request, logger: Logger): Promise<void> {
  const prep = await prepare(req);
  const out = await forEachTarget(req, (t) =>
    withClient(req, prep.params, t, async (client) => {
      // A first release is in service since DeployCandidate.
      if (firstRelease(req, t)) return { status: TargetStatus.Unchanged };
      // Without a route the stable Deployments were scaled down: their replicas back first, and
      // manent-canary's claim on them dropped, so that the release's apply owns them again.
      if (!prep.params.traffic_route) await restoreStables(req, prep.params, client, false);
      const result = await deployTarget(req, prep, t, client, logger);
      await removeCandidate(req, prep.params, prep.ctx, client, false);
      return result;
    }),
  );
  if (out.error) throw out.error;
}

/** Nothing left to retire: the promote's rollout replaced the previous pods. */
export async function retirePrevious(_req: Request): Promise<void> {}

/** Weight back to the stable Services, tester rule and candidate objects removed; a first release removed as a rollback to nothing does. */
export async function revertCandidate(req: Request): Promise<void> {
  const params = parseParams(req.params);
  const ctx = contextOf(req, params);
  const out = await forAllTargets(req, (t) =>
    withClient(req, params, t, async (client) => {
      if (firstRelease(req, t)) {
        const none = { host: targetId(t), version: "" };
        await rollbackOn(client, { ...req, releases: [none] }, params, ctx, none);
        return {};
      }
      await removeCandidate(req, params, ctx, client, true);
      return {};
    }),
  );
  if (out.error) throw out.error;
}

/** Renders the release and applies its candidates with replicas for `weight`; with `wait`, until they have rolled out. */
async function candidates(req: Request, prep: Prepared, client: ClusterClient, weight: number, wait: boolean): Promise<KubeObject[]> {
  const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
  const withRoute = Boolean(prep.params.traffic_route);
  const cands = candidateObjects(r.objects, withRoute, (o) => {
    const n = recordedReplicas(req, client, o);
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
function recordedReplicas(req: Request, client: ClusterClient, stable: KubeObject): number {
  const recorded = req.traffic?.[`replicas/${clusterKey(client.target)}/${stable.metadata.name}`];
  return recorded === undefined ? specReplicas(stable) : Number(recorded);
}

/**
 * Without a route: the recorded pods of each stable Deployment divided between it and its
 * candidate ({@link replicaSplit}), so the candidate's share of the stable Service's endpoints is
 * the weight. The side that grows goes first and is waited for, then the other shrinks: capacity
 * never drops below what was recorded.
 */
async function divideReplicas(req: Request, prep: Prepared, client: ClusterClient, weight: number): Promise<void> {
  const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
  const stables = r.objects.filter((o) => o.apiVersion === "apps/v1" && o.kind === "Deployment");
  const first = stables[0];
  if (!first) return;
  const live = await client.get("apps/v1", "Deployment", prep.params.namespace, canaryName(first.metadata.name), req.signal);
  const up = replicaSplit(recordedReplicas(req, client, first), weight).candidate >= (live ? specReplicas(live) : 0);
  const scaleStables = async () => {
    for (const o of stables) {
      const stable = replicaSplit(recordedReplicas(req, client, o), weight).stable;
      await scaleStable(client, prep.params.namespace, o.metadata.name, stable, req.signal);
    }
    await waitForRollouts(client, stables, prep.params.wait_timeout, req.signal);
  };
  if (!up) await scaleStables();
  // At weight 0 nothing is asked of the candidate: a revert must not wait on (or fail with) a candidate that never became ready.
  await candidates(req, prep, client, weight, weight > 0);
  if (up) await scaleStables();
  req.logger.info("kubernetes: replicas divided", { cluster: targetId(client.target), candidate_weight: weight });
}

/** Gives the stable Deployments the replicas PrepareSlots recorded (see restoreStable); with `wait`, until they have rolled out. */
async function restoreStables(req: Request, params: KubernetesParams, client: ClusterClient, wait: boolean): Promise<void> {
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

async function stableServices(req: Request, prep: Prepared, client: ClusterClient): Promise<Set<string>> {
  const r = await renderForCluster(client, prep.content, req, prep.params, prep.ctx, await client.version());
  return new Set(r.objects.filter((o) => o.apiVersion === "v1" && o.kind === "Service").map((o) => o.metadata.name));
}

/** The route back to its recorded rules (no candidate refs, no tester rule), or the stable replicas back without one; candidate objects deleted. */
async function removeCandidate(
  req: Request,
  params: KubernetesParams,
  ctx: ReleaseContext,
  client: ClusterClient,
  restoreReplicas: boolean,
): Promise<void> {
  const cands = await listCandidates(client, params.namespace, selectorOf(ctx), req.signal);
  // After a promote the release's apply gave the stable Deployments their (new) replicas.
  if (!params.traffic_route && restoreReplicas) {
    // The stable pods back before the candidate's go; the candidate goes even when they do not come back.
    const failed = await restoreStables(req, params, client, true).then(
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
        tester: testerMatch(params.tester_header),
        testers: null,
        headerRoute: null,
        mirror: false,
        recorded: recordedRules(req.traffic?.[`route_rules/${clusterKey(client.target)}`]),
      });
      await writeRouteRules(client, params.namespace, params.traffic_route, rules, { signal: req.signal });
    }
  }
  await deleteAll(client, sortForDelete(cands.map(refOf)), req.signal);
  req.logger.info("kubernetes: candidate removed", { cluster: client.name, objects: cands.length });
}

/**
 * Whether the cluster had no release in service when the canary began (PrepareSlots recorded an
 * empty stable version): its candidate is the release itself, deployed in full.
 */
function firstRelease(req: Request, t: Target): boolean {
  return req.traffic?.[`stable_version/${clusterKey(t)}`] === "";
}
