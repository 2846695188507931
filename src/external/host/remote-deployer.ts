import { status, type ServiceError } from "@grpc/grpc-js";
import { Code, ManentError } from "../../core/errors.js";
import { Capability, type Deployer } from "../../core/contract/deployer.js";
import {
  TargetStatus,
  type Artifact,
  type Request,
  type Result,
  type RollbackRequest,
  type TargetDrift,
  type TargetRelease,
} from "../../core/contract/types.js";
import { ResultError } from "../../core/contract/result-error.js";
import { byTargetId } from "../../core/contract/targets.js";
import type { DeployRequest } from "../gen/deployer.js";
import { artifactToProto, driftFromProto, releaseFromProto, releaseToProto, requestToProto, resultFromProto } from "../protocol/convert.js";
import type { UnaryCall } from "../protocol/h2-channel.js";
import type { PluginProcess } from "./plugin-process.js";

/** Runs one call on the live process (started on demand); supplied by the supervisor. */
export type CallRunner = <T>(call: string, run: (p: PluginProcess) => Promise<T>) => Promise<T>;

type Unary<Req, Res> = UnaryCall<Req, Res>;

/** Validate has no deploy context: it gets a fixed deadline (external-plugins.md). */
const validateTimeoutMs = 30_000;

/**
 * The host's Deployer for an external plugin: each method is one gRPC call. The optional
 * methods exist only for the capabilities the plugin declared at Configure, so the engine's
 * `capabilitiesOf` sees the same interfaces as the plugin implements.
 */
export function remoteDeployer(name: string, caps: readonly string[], run: CallRunner): Deployer {
  const parallel = caps.includes(Capability.ParallelTargets);

  function unary<Req, Res>(
    call: string,
    method: (p: PluginProcess) => Unary<Req, Res>,
    req: Req,
    signal?: AbortSignal,
    timeoutMs?: number,
  ): Promise<Res> {
    return run(call, (p) => unaryOn(name, call, p, method, req, signal, timeoutMs));
  }

  /** A call with the deploy context: the Secrets service is served on a fresh broker id for its duration. */
  function withSecrets<Res>(call: string, req: Request, send: (p: PluginProcess, wire: DeployRequest) => Promise<Res>): Promise<Res> {
    return run(call, async (p) => {
      const served = await p.secrets.open(req.secrets, call);
      try {
        return await send(p, requestToProto({ ...req, parallelism: parallel ? req.parallelism : 1 }, served.id, served.token));
      } finally {
        served.close();
      }
    });
  }

  const wire = (req: Request): DeployRequest => requestToProto({ ...req, parallelism: parallel ? req.parallelism : 1 }, 0);
  const direct = <Req, Res>(call: string, p: PluginProcess, m: (p: PluginProcess) => Unary<Req, Res>, r: Req, signal: AbortSignal) =>
    unaryOn(name, call, p, m, r, signal);

  const d: Record<string, unknown> = {
    name: () => name,
    async supports(artifact: Artifact): Promise<boolean> {
      // A communication error counts as "not supported" (external-plugins.md).
      try {
        const res = await unary("Supports", (p) => p.deployer.supports, { artifact: artifactToProto(artifact) });
        return res.supported;
      } catch {
        return false;
      }
    },
    async validate(req: Request): Promise<void> {
      await unary("Validate", (p) => p.deployer.validate, wire(req), req.signal, validateTimeoutMs);
    },
    deploy: (req: Request): Promise<Result> =>
      reported(
        req,
        withSecrets("Deploy", req, async (p, w) => resultFromProto(await direct("Deploy", p, (q) => q.deployer.deploy, w, req.signal))),
      ),
  };
  if (caps.includes(Capability.DryRun)) {
    d.dryRun = (req: Request): Promise<Result> =>
      reported(
        req,
        withSecrets("DryRun", req, async (p, w) => resultFromProto(await direct("DryRun", p, (q) => q.deployer.dryRun, w, req.signal))),
      );
  }
  if (caps.includes(Capability.CurrentRelease) || caps.includes(Capability.Rollback)) {
    d.currentRelease = (req: Request): Promise<TargetRelease[]> =>
      withSecrets("CurrentRelease", req, async (p, w) =>
        byTargetId(
          req.targets,
          (await direct("CurrentRelease", p, (q) => q.deployer.currentRelease, w, req.signal)).releases.map(releaseFromProto),
        ),
      );
  }
  if (caps.includes(Capability.Rollback)) {
    d.rollback = (req: RollbackRequest): Promise<Result> =>
      reported(
        req,
        withSecrets("Rollback", req, async (p, w) =>
          resultFromProto(
            await direct("Rollback", p, (q) => q.deployer.rollback, { request: w, releases: req.releases.map(releaseToProto) }, req.signal),
          ),
        ),
      );
  }
  // The percentage-rollout calls act on targets as Deploy does (a candidate is a release, a router
  // may need its API token), so they get the deploy context: the Secrets service for their duration.
  const rolloutCall = <Req, Res>(
    call: string,
    req: Request,
    m: (p: PluginProcess) => Unary<Req, Res>,
    build: (w: DeployRequest) => Req,
  ): Promise<Res> => withSecrets(call, req, (p, w) => direct(call, p, m, build(w), req.signal));
  const asIs = (w: DeployRequest) => w;
  if (caps.includes(Capability.Slots)) {
    d.prepareSlots = async (req: Request) => (await rolloutCall("PrepareSlots", req, (p) => p.deployer.prepareSlots, asIs)).state;
    d.deployCandidate = (req: Request) =>
      reported(req, rolloutCall("DeployCandidate", req, (p) => p.deployer.deployCandidate, asIs).then(resultFromProto));
    d.promoteCandidate = async (req: Request) =>
      void (await rolloutCall("PromoteCandidate", req, (p) => p.deployer.promoteCandidate, asIs));
    d.revertCandidate = async (req: Request) => void (await rolloutCall("RevertCandidate", req, (p) => p.deployer.revertCandidate, asIs));
    d.retirePrevious = async (req: Request) => void (await rolloutCall("RetirePrevious", req, (p) => p.deployer.retirePrevious, asIs));
  }
  if (caps.includes(Capability.TrafficRouter)) {
    d.setCandidateWeight = async (req: Request, weight: number) =>
      void (await rolloutCall(
        "SetCandidateWeight",
        req,
        (p) => p.deployer.setCandidateWeight,
        (w) => ({ request: w, weight }),
      ));
    d.candidateWeight = async (req: Request) => (await rolloutCall("CandidateWeight", req, (p) => p.deployer.candidateWeight, asIs)).weight;
  }
  if (caps.includes(Capability.Testers)) {
    d.routeTesters = async (req: Request) => (await rolloutCall("RouteTesters", req, (p) => p.deployer.routeTesters, asIs)).details;
  }
  if (caps.includes(Capability.Scale)) {
    d.scaleCandidate = async (req: Request, weight: number) =>
      void (await rolloutCall(
        "ScaleCandidate",
        req,
        (p) => p.deployer.scaleCandidate,
        (w) => ({ request: w, weight }),
      ));
  }
  if (caps.includes(Capability.Drift)) {
    d.drift = (req: Request): Promise<TargetDrift[]> =>
      withSecrets("Drift", req, async (p, w) =>
        byTargetId(req.targets, (await direct("Drift", p, (q) => q.deployer.drift, w, req.signal)).targets.map(driftFromProto)),
      );
  }
  if (parallel) d.parallelTargets = () => true;
  return d as unknown as Deployer;
}

/**
 * Reports each finished target to `req.progress` once the call is back (the protocol has no
 * per-target stream), as forEachTarget does in process: every target that ran, success or not.
 * Results are named by target identity first (a plugin built before target names sends hosts).
 */
async function reported(req: Request, call: Promise<Result>): Promise<Result> {
  const named = (r: Result): Result => ({ ...r, targets: byTargetId(req.targets, r.targets) });
  const report = (r: Result) => {
    if (req.progress) for (const t of r.targets) if (t.status !== TargetStatus.Skipped) req.progress(t);
  };
  let r: Result;
  try {
    r = named(await call);
  } catch (err) {
    if (!(err instanceof ResultError)) throw err;
    const e = new ResultError(err, named(err.result));
    report(e.result);
    throw e;
  }
  report(r);
  return r;
}

/**
 * One unary call on a given process, cancelled with `signal`. A gRPC failure is rejected as the
 * raw ServiceError: the call runner converts it, knowing whether the process died meanwhile.
 */
function unaryOn<Req, Res>(
  name: string,
  call: string,
  p: PluginProcess,
  method: (p: PluginProcess) => Unary<Req, Res>,
  req: Req,
  signal?: AbortSignal,
  timeoutMs?: number,
): Promise<Res> {
  const cancelled = () => new ManentError(Code.Canceled, `plugin ${name}: ${call} cancelled`, { details: { plugin: name } });
  if (signal?.aborted) return Promise.reject(cancelled());
  return method(p)(req, { deadline: timeoutMs ? Date.now() + timeoutMs : undefined, signal }).catch((err: ServiceError) => {
    throw err.code === status.CANCELLED && signal?.aborted ? cancelled() : err;
  });
}
