import type { Artifact, HeaderRoute, Logger, Request, Result, RollbackRequest, TargetDrift, TargetRelease } from "./types.js";

/** The contract every plugin implements, built in or external. */
export interface Deployer {
  /** The plugin's name, as in manent.yml and `Result.plugin`. */
  name(): string;
  /** Whether this plugin can deploy the artifact (used when the envconfig names no plugin). */
  supports(artifact: Artifact): boolean | Promise<boolean>;
  /** Checks the request without touching targets and without secrets. */
  validate(req: Request): Promise<void>;
  deploy(req: Request): Promise<Result>;
}

/** A container image an artifact runs, where it is named. */
export interface ContainerImage {
  /** The reference as written: `registry/repository@sha256:…`. */
  image: string;
  /** The manifest file and the field naming it, for messages. */
  file: string;
  field: string;
}

/**
 * Optional (built-in plugins): lists the container images the artifact runs, without touching
 * targets, so a verification policy can check their signatures before anything changes. A
 * reference not pinned by digest is refused when `require_image_digest` is set.
 */
export interface ImageLister {
  images(req: Request): Promise<ContainerImage[]>;
}

/** Optional: a dry-run that checks everything the deploy would do and changes nothing. */
export interface DryRunner {
  dryRun(req: Request): Promise<Result>;
}

/** Optional: tells the release each target runs now (recorded in the checkpoint). */
export interface ReleaseInspector {
  currentRelease(req: Request): Promise<TargetRelease[]>;
}

/** Optional: returns targets to the releases recorded in the checkpoint. */
export interface Rollbacker {
  rollback(req: RollbackRequest): Promise<Result>;
}

/**
 * Optional: tells what runs on each target and whether it still matches the release recorded by
 * the last deploy (`req.artifact.version`), changing nothing. One {@link TargetDrift} per target, in order.
 */
export interface DriftInspector {
  drift(req: Request): Promise<TargetDrift[]>;
}

/** Optional: the plugin honours `Request.parallelism`. */
export interface ParallelDeployer {
  parallelTargets(): boolean;
}

/** Optional, percentage rollouts: a second slot beside the running release. */
export interface SlotDeployer {
  prepareSlots(req: Request): Promise<Record<string, string>>;
  deployCandidate(req: Request): Promise<Result>;
  promoteCandidate(req: Request): Promise<void>;
  revertCandidate(req: Request): Promise<void>;
  retirePrevious(req: Request): Promise<void>;
}

/** Optional, percentage rollouts: moves traffic between the slots (weight 0–100). */
export interface TrafficRouter {
  setCandidateWeight(req: Request, weight: number): Promise<void>;
  candidateWeight(req: Request): Promise<number>;
}

/** Optional, percentage rollouts: routes testers to the candidate. */
export interface TesterRouter {
  routeTesters(req: Request): Promise<Record<string, string>>;
}

/**
 * Optional, percentage rollouts (`set_header_route` steps): requests matching a header or cookie go
 * to the candidate whatever the weight; `null` removes the match. Promote and revert remove it too.
 */
export interface HeaderRouter {
  setHeaderRoute(req: Request, route: HeaderRoute | null): Promise<void>;
}

/**
 * Optional, percentage rollouts (`set_mirror` steps): a copy of `percent` percent of the requests
 * goes to the candidate too, its answers discarded; 0 stops it. Promote and revert stop it too.
 */
export interface RequestMirror {
  setMirror(req: Request, percent: number): Promise<void>;
}

/**
 * Optional, percentage rollouts (`session_affinity: true`): a client that reached one version
 * stays on it while both run (`Request.rollout.sessionAffinity` tells the plugin to set it up).
 */
export interface SessionAffinity {
  sessionAffinity(): boolean;
}

/** Optional, percentage rollouts: scales the candidate with its weight. */
export interface SlotScaler {
  scaleCandidate(req: Request, weight: number): Promise<void>;
}

/** Builds a deployer from its manent.yml configuration. Throws on a bad configuration. */
export type Factory = (config: Record<string, unknown>, logger: Logger) => Deployer | Promise<Deployer>;

/** Capability names, as announced in the response to Configure. */
export const Capability = {
  DryRun: "dry_run",
  CurrentRelease: "current_release",
  Rollback: "rollback",
  Slots: "slots",
  TrafficRouter: "traffic_router",
  Testers: "testers",
  Scale: "scale",
  ParallelTargets: "parallel_targets",
  Drift: "drift",
  HeaderRoute: "header_route",
  Mirror: "mirror",
  SessionAffinity: "session_affinity",
} as const;
export type Capability = (typeof Capability)[keyof typeof Capability];
export const allCapabilities: readonly Capability[] = Object.values(Capability);
/** The capabilities the external plugin protocol carries: header routes, mirroring and session affinity are built-in plugins' only for now. */
export const protocolCapabilities: readonly Capability[] = allCapabilities.filter(
  (c) => c !== Capability.HeaderRoute && c !== Capability.Mirror && c !== Capability.SessionAffinity,
);

function hasMethods(d: object, ...methods: string[]): boolean {
  return methods.every((m) => typeof (d as Record<string, unknown>)[m] === "function");
}

export function isImageLister(d: Deployer): d is Deployer & ImageLister {
  return hasMethods(d, "images");
}
export function isDryRunner(d: Deployer): d is Deployer & DryRunner {
  return hasMethods(d, "dryRun");
}
export function isReleaseInspector(d: Deployer): d is Deployer & ReleaseInspector {
  return hasMethods(d, "currentRelease");
}
export function isRollbacker(d: Deployer): d is Deployer & Rollbacker {
  return hasMethods(d, "rollback");
}
export function isDriftInspector(d: Deployer): d is Deployer & DriftInspector {
  return hasMethods(d, "drift");
}
export function isParallelDeployer(d: Deployer): d is Deployer & ParallelDeployer {
  return hasMethods(d, "parallelTargets") && (d as Deployer & ParallelDeployer).parallelTargets();
}
export function isSlotDeployer(d: Deployer): d is Deployer & SlotDeployer {
  return hasMethods(d, "prepareSlots", "deployCandidate", "promoteCandidate", "revertCandidate", "retirePrevious");
}
export function isTrafficRouter(d: Deployer): d is Deployer & TrafficRouter {
  return hasMethods(d, "setCandidateWeight", "candidateWeight");
}
export function isTesterRouter(d: Deployer): d is Deployer & TesterRouter {
  return hasMethods(d, "routeTesters");
}
export function isHeaderRouter(d: Deployer): d is Deployer & HeaderRouter {
  return hasMethods(d, "setHeaderRoute");
}
export function isRequestMirror(d: Deployer): d is Deployer & RequestMirror {
  return hasMethods(d, "setMirror");
}
export function hasSessionAffinity(d: Deployer): d is Deployer & SessionAffinity {
  return hasMethods(d, "sessionAffinity") && (d as Deployer & SessionAffinity).sessionAffinity();
}
export function isSlotScaler(d: Deployer): d is Deployer & SlotScaler {
  return hasMethods(d, "scaleCandidate");
}

/**
 * The capabilities a deployer declares, derived from the optional interfaces it implements.
 * Rollback needs both Rollbacker and ReleaseInspector: without the current release there is
 * nothing to roll back to.
 */
export function capabilitiesOf(d: Deployer): Capability[] {
  const caps: Capability[] = [];
  if (isDryRunner(d)) caps.push(Capability.DryRun);
  if (isReleaseInspector(d)) caps.push(Capability.CurrentRelease);
  if (isRollbacker(d) && isReleaseInspector(d)) caps.push(Capability.Rollback);
  if (isSlotDeployer(d)) caps.push(Capability.Slots);
  if (isTrafficRouter(d)) caps.push(Capability.TrafficRouter);
  if (isTesterRouter(d)) caps.push(Capability.Testers);
  if (isSlotScaler(d)) caps.push(Capability.Scale);
  if (isParallelDeployer(d)) caps.push(Capability.ParallelTargets);
  if (isDriftInspector(d)) caps.push(Capability.Drift);
  if (isHeaderRouter(d)) caps.push(Capability.HeaderRoute);
  if (isRequestMirror(d)) caps.push(Capability.Mirror);
  if (hasSessionAffinity(d)) caps.push(Capability.SessionAffinity);
  return caps;
}
