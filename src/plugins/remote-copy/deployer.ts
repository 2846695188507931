import {
  forAllTargets,
  forEachTarget,
  resultOrThrow,
  targetId,
  TargetStatus,
  type Artifact,
  type Deployer,
  type HeaderRoute,
  type HeaderRouter,
  type SessionAffinity,
  type DriftInspector,
  type DryRunner,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type RollbackRequest,
  type Rollbacker,
  type SlotDeployer,
  type TesterRouter,
  type TrafficRouter,
  type Target,
  type TargetOutcome,
  type TargetDrift,
  type TargetRelease,
  type TargetsOutcome,
} from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { reachedAddresses } from "../reached-addresses.js";
import { artifactFile } from "./artifact-file.js";
import { readSshSecrets } from "./connect.js";
import { deployTarget } from "./deploy-target.js";
import { driftOf } from "./drift-target.js";
import { dryRunTarget } from "./dry-run-target.js";
import { baseFor, checkVersion, parseParams, type Params } from "./params.js";
import { probe } from "./release-steps.js";
import { restoreTarget } from "./restore-target.js";
import { callFailure, withSite, type CallContext } from "./site.js";
import { slotsFor } from "./slot-params.js";
import {
  checkPromoted,
  deployCandidateTarget,
  needTraffic,
  pairOf,
  pairsOf,
  prepareTarget,
  promoteTarget,
  restoreLiveTarget,
  slotState,
  stopSlot,
  trafficOf,
} from "./slot-rollout.js";

export const pluginName = "remote-copy";

/** Params an envconfig cannot change once manent.yml sets them. */
const pinnedParams = ["haproxy_socket"] as const;

/** Artifact types this plugin picks when an envconfig names no plugin. */
const supportedTypes = new Set(["file", "tarball", "archive"]);

/**
 * Copies an artifact to hosts, into `<base>/releases/<version>`, and switches `<base>/current`
 * to it atomically; over SSH or on the local filesystem. With two slots per host (param
 * `slot_ports`) and HAProxy (param `haproxy_socket`), it takes part in percentage rollouts: the
 * candidate starts in the slot beside the live one and HAProxy's weights move traffic to it.
 */
export class RemoteCopyDeployer
  implements
    Deployer,
    DryRunner,
    ReleaseInspector,
    Rollbacker,
    ParallelDeployer,
    SlotDeployer,
    TrafficRouter,
    TesterRouter,
    DriftInspector,
    HeaderRouter,
    SessionAffinity
{
  /** `defaults`: param values from manent.yml, overridden by the envconfig's. Logs go to `req.logger`. */
  constructor(private readonly defaults: Record<string, string>) {}

  name(): string {
    return pluginName;
  }

  supports(artifact: Artifact): boolean {
    return supportedTypes.has(artifact.type);
  }

  parallelTargets(): boolean {
    return true;
  }

  async validate(req: Request): Promise<void> {
    const params = this.params(req);
    checkVersion(req.artifact.version);
    this.checkRolloutPlan(req, params);
    if (params.transport === "local" && req.targets.length > 1 && !params.base.includes("{host}") && !params.base.includes("{name}")) {
      throw new ManentError(
        Code.InvalidArgument,
        "remote-copy: param base: must contain {host} or {name} when transport local has several targets (they would share one dir)",
        { details: { plugin: pluginName, param: "base" } },
      );
    }
    // Two targets on one machine (local, or one address and port) with one dir, or with one HAProxy server name, would
    // overwrite each other, the second reported unchanged. A machine is what is reached, not how it is named:
    // 127.0.0.1 and localhost, or two names of one host, are one machine.
    const reached = await reachedAddresses(params.transport === "local" ? [] : req.targets);
    const machines = (t: Target): string[] =>
      params.transport === "local" ? ["local"] : (reached.get(t.host) ?? [t.host]).map((a) => `${a}:${t.port ?? 22}`);
    const dirs = new Map<string, Target>();
    const servers = new Map<string, Target>();
    for (const t of req.targets) {
      for (const machine of machines(t)) {
        const dir = `${machine} ${baseFor(params, t)}`;
        const other = dirs.get(dir);
        if (other) {
          const where =
            params.transport === "local"
              ? "this machine"
              : `${machine}${other.host !== t.host ? ` (${other.host} and ${t.host} are one address)` : ""}`;
          throw new ManentError(
            Code.InvalidArgument,
            `remote-copy: param base: targets ${targetId(other)} and ${targetId(t)} reach the same place, ${baseFor(params, t)} on ${where}: ` +
              `they would be one target, deployed once; remove one, or put {name} in base`,
            { details: { plugin: pluginName, param: "base", targets: `${targetId(other)},${targetId(t)}` } },
          );
        }
        dirs.set(dir, t);
      }
      if (params.haproxy_socket) {
        const server = params.haproxy_server.replaceAll("{host}", t.host).replaceAll("{name}", targetId(t));
        const same = servers.get(server);
        if (same) {
          throw new ManentError(
            Code.InvalidArgument,
            `remote-copy: param haproxy_server: targets ${targetId(same)} and ${targetId(t)} would have the same HAProxy servers (${server}): put {name} in haproxy_server`,
            { details: { plugin: pluginName, param: "haproxy_server" } },
          );
        }
        servers.set(server, t);
      }
      const slots = slotsFor(params.slot_ports, t);
      if (req.rollout && !slots) {
        throw new ManentError(
          Code.InvalidArgument,
          `remote-copy: param slot_ports: target ${targetId(t)} has no slots (param or label slot_ports, e.g. blue=8081,green=8082), which the envconfig's rollout.canary needs: the candidate runs in the slot beside the live one`,
          { details: { plugin: pluginName, param: "slot_ports", host: targetId(t) } },
        );
      }
      if (params.haproxy_socket && !slots) {
        throw new ManentError(
          Code.InvalidArgument,
          `remote-copy: param slot_ports: target ${targetId(t)} has no slots (param or label slot_ports), which haproxy_socket needs: its servers are the slots`,
          { details: { plugin: pluginName, param: "slot_ports", host: t.host } },
        );
      }
    }
  }

  /** What the canary will ask (Request.rollout): a router for its weights, a tester backend for its testers. */
  private checkRolloutPlan(req: Request, params: Params): void {
    const plan = req.rollout;
    if (!plan) return;
    if (plan.weights && (!params.haproxy_socket || !params.haproxy_backend)) {
      throw new ManentError(
        Code.InvalidArgument,
        `remote-copy: param ${params.haproxy_socket ? "haproxy_backend" : "haproxy_socket"}: the envconfig's rollout.canary sets weights, which move traffic through HAProxy: set params haproxy_socket and haproxy_backend`,
        { details: { plugin: pluginName, param: params.haproxy_socket ? "haproxy_backend" : "haproxy_socket" } },
      );
    }
    if (plan.headerRoutes && !params.haproxy_route_acl) {
      throw new ManentError(
        Code.InvalidArgument,
        "remote-copy: param haproxy_route_acl: the envconfig's rollout.canary has set_header_route steps, which HAProxy applies through an ACL file of haproxy.cfg: set params haproxy_socket, haproxy_backend, haproxy_tester_backend and haproxy_route_acl",
        { details: { plugin: pluginName, param: "haproxy_route_acl" } },
      );
    }
    if (plan.sessionAffinity && (!params.haproxy_socket || !params.haproxy_backend)) {
      throw new ManentError(
        Code.InvalidArgument,
        "remote-copy: param haproxy_socket: the envconfig's rollout.canary.session_affinity keeps clients on a version through HAProxy's cookie persistence: set params haproxy_socket and haproxy_backend",
        { details: { plugin: pluginName, param: "haproxy_socket" } },
      );
    }
    if (plan.testers && (!params.haproxy_socket || !params.haproxy_backend || !params.haproxy_tester_backend)) {
      throw new ManentError(
        Code.InvalidArgument,
        "remote-copy: param haproxy_tester_backend: the envconfig's rollout.canary.testers routes testers to the candidate through HAProxy: set params haproxy_socket, haproxy_backend and haproxy_tester_backend",
        { details: { plugin: pluginName, param: "haproxy_tester_backend" } },
      );
    }
  }

  async deploy(req: Request): Promise<Result> {
    await this.validate(req);
    const file = await artifactFile(req.artifact);
    const call = await this.call(req);
    const outcome = await forEachTarget(req, (target, signal) => withSite(call, target, signal, (site) => deployTarget(call, site, file)));
    return this.result(req, outcome);
  }

  async dryRun(req: Request): Promise<Result> {
    await this.validate(req);
    const file = await artifactFile(req.artifact);
    const call = await this.call(req);
    const routing = await this.checkRouting(call);
    const outcome = await forAllTargets(req, async (target, signal) => {
      const r = await withSite(call, target, signal, (site) => dryRunTarget(call, site, file));
      const problems = routing.get(targetId(target)) ?? [];
      if (problems.length > 0) {
        throw new ManentError(Code.FailedPrecondition, `${targetId(target)}: haproxy: ${problems.join("; ")}`, {
          details: { host: target.host, plugin: pluginName },
        });
      }
      return r;
    });
    return this.result(req, outcome);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const call = await this.call(req);
    const releases = new Map<string, TargetRelease>();
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, async (site) => {
        const { current } = await probe(site, "");
        const release_path = current ? `${site.base}/releases/${current}` : "";
        releases.set(targetId(target), {
          host: targetId(target),
          version: current,
          details: { release_path },
        });
        return {};
      }),
    );
    const error = callFailure(req, outcome.error);
    if (error) throw error;
    return req.targets.map((t) => releases.get(targetId(t))!);
  }

  /** Each target's live release against `req.artifact.version`, and its files against their install-time sha256. */
  async drift(req: Request): Promise<TargetDrift[]> {
    const call = await this.call(req);
    const found = new Map<string, TargetDrift>();
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, async (site) => {
        found.set(targetId(target), { host: targetId(target), ...(await driftOf(site, req.artifact.version)) });
        return {};
      }),
    );
    const error = callFailure(req, outcome.error);
    if (error) throw error;
    return req.targets.map((t) => found.get(targetId(t))!);
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const call = await this.call(req);
    const outcome = await forAllTargets(req, async (target, signal): Promise<TargetOutcome> => {
      const recorded = req.releases.find((r) => r.host === targetId(target));
      if (!recorded) {
        return {
          status: TargetStatus.Skipped,
          details: {
            reason: "no release recorded for this host in the checkpoint",
          },
        };
      }
      if (recorded.version !== "") checkVersion(recorded.version);
      return withSite(call, target, signal, (site) => restoreTarget(call, site, recorded.version));
    });
    return this.result(req, outcome);
  }

  async prepareSlots(req: Request): Promise<Record<string, string>> {
    await this.validate(req);
    const call = await this.call(req);
    const pairs = new Map<string, Awaited<ReturnType<typeof prepareTarget>>>();
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, async (site) => {
        pairs.set(targetId(target), await prepareTarget(site));
        return {};
      }),
    );
    const error = callFailure(req, outcome.error);
    if (error) throw error;
    return slotState(req.targets.map((t) => pairs.get(targetId(t))!));
  }

  async deployCandidate(req: Request): Promise<Result> {
    await this.validate(req);
    pairsOf(req);
    const file = await artifactFile(req.artifact);
    const call = await this.call(req);
    const traffic = trafficOf(call);
    const outcome = await forEachTarget(req, (target, signal) =>
      withSite(call, target, signal, (site) => deployCandidateTarget(call, site, pairOf(req, target), file, traffic)),
    );
    return this.result(req, outcome);
  }

  async setCandidateWeight(req: Request, weight: number): Promise<void> {
    if (!Number.isInteger(weight) || weight < 0 || weight > 100) {
      throw new ManentError(Code.InvalidArgument, `remote-copy: weight ${weight} must be a whole number 0-100`, {
        details: { plugin: pluginName },
      });
    }
    const call = await this.call(req);
    await needTraffic(call).setCandidateWeight(pairsOf(req), weight, req.signal);
  }

  async candidateWeight(req: Request): Promise<number> {
    const call = await this.call(req);
    const [first] = pairsOf(req);
    if (!first) return 0;
    return needTraffic(call).candidateWeight(first, req.signal);
  }

  async routeTesters(req: Request): Promise<Record<string, string>> {
    const call = await this.call(req);
    const traffic = needTraffic(call);
    if (!traffic.testerBackend) {
      throw new ManentError(
        Code.FailedPrecondition,
        "remote-copy: no tester route: set param haproxy_tester_backend (the backend haproxy.cfg sends testers to by a header or cookie rule)",
        { details: { plugin: pluginName, param: "haproxy_tester_backend" } },
      );
    }
    const pairs = pairsOf(req);
    await traffic.testersTo(
      pairs.map((p) => ({ ...p, to: p.candidate, from: p.live })),
      req.signal,
    );
    return {
      haproxy_backend: traffic.testerBackend,
      ...(call.params.tester_header ? { header: call.params.tester_header } : {}),
      servers: pairs.map((p) => traffic.serverName(p, p.candidate)).join(","),
    };
  }

  /**
   * Requests matching `route` go to the tester backend, the candidate's servers made the ready
   * ones there first (as RouteTesters does), so they reach the candidate whatever the weight.
   */
  async setHeaderRoute(req: Request, route: HeaderRoute | null): Promise<void> {
    const call = await this.call(req);
    const traffic = needTraffic(call);
    const pairs = pairsOf(req);
    if (route && traffic.testerBackend)
      await traffic.testersTo(
        pairs.map((p) => ({ ...p, to: p.candidate, from: p.live })),
        req.signal,
      );
    await traffic.setHeaderRoute(route, req.signal);
  }

  /** HAProxy's cookie persistence (haproxy.cfg's `cookie … insert`), with retiring servers put in maintenance rather than drained. */
  sessionAffinity(): boolean {
    return true;
  }

  async promoteCandidate(req: Request): Promise<void> {
    const call = await this.call(req);
    const pairs = pairsOf(req);
    const traffic = trafficOf(call);
    if (traffic) {
      // The header route ends with the rollout: once promoted, everyone reaches the new release.
      await traffic.setHeaderRoute(null, req.signal);
      await traffic.setCandidateWeight(pairs, 100, req.signal);
      await traffic.testersTo(
        pairs.map((p) => ({ ...p, to: p.candidate, from: p.live })),
        req.signal,
      );
    }
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, (site) => promoteTarget(call, site, pairOf(req, target))),
    );
    this.result(req, outcome);
  }

  async retirePrevious(req: Request): Promise<void> {
    const call = await this.call(req);
    const pairs = pairsOf(req);
    const checked = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, async (site) => {
        await checkPromoted(site, pairOf(req, target));
        return {};
      }),
    );
    this.result(req, checked);
    const traffic = trafficOf(call);
    const previous = pairs.map((p) => ({ ...p, slot: p.live }));
    // Stop a slot only once HAProxy has no connection left on it: no request is cut.
    if (traffic) await traffic.drain(previous, call.params.drain_timeout, req.signal);
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, (site) => stopSlot(call, site, pairOf(req, target).live)),
    );
    this.result(req, outcome);
    if (traffic) await traffic.maint(previous, req.signal);
  }

  async revertCandidate(req: Request): Promise<void> {
    const call = await this.call(req);
    const pairs = pairsOf(req);
    const traffic = trafficOf(call);
    // After a promote the live slot may have been stopped: it is made live and started again first.
    const restored = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, (site) => restoreLiveTarget(call, site, pairOf(req, target))),
    );
    this.result(req, restored);
    const candidates = pairs.map((p) => ({ ...p, slot: p.candidate }));
    if (traffic) {
      for (const p of pairs) await traffic.ready(p, p.live, req.signal);
      await traffic.setHeaderRoute(null, req.signal);
      await traffic.setCandidateWeight(pairs, 0, req.signal);
      await traffic.testersTo(
        pairs.map((p) => ({ ...p, to: p.live, from: p.candidate })),
        req.signal,
      );
      await traffic.drain(candidates, call.params.drain_timeout, req.signal);
    }
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, (site) => stopSlot(call, site, pairOf(req, target).candidate)),
    );
    this.result(req, outcome);
    if (traffic) await traffic.maint(candidates, req.signal);
  }

  /** Dry-run of the traffic router: HAProxy answers and has each host's slot servers. */
  private async checkRouting(call: CallContext): Promise<Map<string, string[]>> {
    const problems = new Map<string, string[]>();
    const traffic = trafficOf(call);
    if (!traffic) return problems;
    const hosts = call.req.targets.flatMap((t) => {
      const slots = slotsFor(call.params.slot_ports, t);
      return slots ? [{ host: t.host, name: targetId(t), slots: slots.names }] : [];
    });
    try {
      const problems = await traffic.check(hosts, call.req.signal);
      const acl = call.req.rollout?.headerRoutes ? await traffic.routeAcl?.check(call.req.signal) : undefined;
      if (acl) for (const h of hosts) problems.set(h.name, [...(problems.get(h.name) ?? []), acl]);
      return problems;
    } catch (err) {
      const message = ManentError.from(err).message;
      for (const h of hosts) problems.set(h.name, [message]);
    }
    return problems;
  }

  /**
   * The envconfig's params over manent.yml's defaults. The HAProxy runtime API is the server's
   * network: when manent.yml names it, an envconfig (a tenant's file) cannot point elsewhere.
   */
  private params(req: Request): Params {
    for (const key of pinnedParams) {
      const pinned = this.defaults[key];
      const asked = req.params[key];
      if (pinned !== undefined && asked !== undefined && asked !== pinned) {
        throw new ManentError(
          Code.InvalidArgument,
          `remote-copy: param ${key}: fixed by the server's configuration (manent.yml plugins.remote-copy.${key}); remove it from the envconfig`,
          {
            details: { plugin: pluginName, param: key },
          },
        );
      }
    }
    return parseParams({ ...this.defaults, ...req.params });
  }

  /** Params and secrets, read once per call (secrets only for the SSH transport). */
  private async call(req: Request): Promise<CallContext> {
    const params = this.params(req);
    const secrets = params.transport === "ssh" ? await readSshSecrets(params, req) : undefined;
    return { req, params, secrets };
  }

  private result(req: Request, outcome: TargetsOutcome): Result {
    return resultOrThrow({ plugin: pluginName, targets: outcome.targets }, callFailure(req, outcome.error));
  }
}
