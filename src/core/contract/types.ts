/** The data a plugin receives and returns. JSON field names match the wire (snake_case). */

/** What to deploy: the descriptor's `artifact`, plus where manent cached the verified bytes. */
export interface Artifact {
  type: string;
  name: string;
  version: string;
  /** Where the artifact came from: a local path or an http(s) URL. */
  source: string;
  /** Hex sha256 of the bytes, when the descriptor gave one or after manent fetched them. */
  sha256?: string;
  /** Where the artifact's signature is (in the forms `source` takes), when the descriptor names one. */
  signature?: string;
  /** Local path of the verified, immutable copy under workdir (set after the fetch step). */
  path?: string;
}

/** A place a plugin deploys to: a host, a cluster, a region. */
export interface Target {
  host: string;
  port?: number;
  labels: Record<string, string>;
  /**
   * The target's identity in the deploy: the envconfig's `name`, else its host. manent refuses two
   * targets with one identity and sets it on every target it sends; results and releases name
   * their target by it ({@link targetId}).
   */
  name?: string;
}

/** A target's identity: its name, or its host when it has none. `TargetResult.host` and `TargetRelease.host` carry it. */
export function targetId(t: Pick<Target, "host" | "name">): string {
  return t.name || t.host;
}

/** Structured logger handed to plugins; attributes are key/value pairs. */
export interface Logger {
  debug(msg: string, attrs?: Record<string, unknown>): void;
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}

/**
 * Access to the secrets named in the envconfig. Works only while the call that received it
 * runs: afterwards every lookup fails with `failed_precondition`.
 */
export interface SecretsAccessor {
  secret(name: string): Promise<string>;
}

export interface Request {
  deploymentId: string;
  tenant: string;
  application: string;
  environment: string;
  artifact: Artifact;
  targets: Target[];
  /** Envconfig params after CLI overrides; values are strings, as in the envconfig. */
  params: Record<string, string>;
  secrets: SecretsAccessor;
  /** How many targets the plugin may work on at once (1 unless the plugin declares parallel targets). */
  parallelism: number;
  logger: Logger;
  /** Aborted when the deploy is cancelled or the step times out. */
  signal: AbortSignal;
  /** Percentage-rollout state recorded by `prepareSlots`, passed to every later call. */
  traffic?: Record<string, string>;
  /**
   * Set on every call of a deploy that runs a canary, a dry-run's too: what the rollout will ask of
   * the plugin, so `validate` refuses a setting the rollout needs (slots, a router) before anything changes.
   */
  rollout?: RolloutPlan;
  /** Called as each target finishes (by forEachTarget/forAllTargets), for live progress. */
  progress?: (result: TargetResult) => void;
  /**
   * The envconfig's `drift.ignore`: fields manent leaves to others (an autoscaler, a controller, a
   * webhook). Drift does not report them and a deploy does not change them on a live object.
   * Only the kubernetes plugin is given it (the envconfig refuses it for another plugin).
   */
  ignore?: IgnoreRule[];
  /**
   * Set when a verification policy checked the artifact's container images (`image_signatures`):
   * the image references whose signatures verified before the deploy began. A plugin applies no
   * other image: a chart rendered again later (a retry, a deploy that waited for its window) may
   * name others, which were never checked.
   */
  verifiedImages?: string[];
}

/** One entry of `drift.ignore`: which objects (kind, and optionally group, name, namespace) and which of their fields. */
export interface IgnoreRule {
  /** An object kind (`Deployment`), or `*` for every kind. */
  kind: string;
  /** The API group (`apps`; "" for the core group); absent: any. */
  group?: string | undefined;
  name?: string | undefined;
  namespace?: string | undefined;
  /** Field paths ({@link parseFieldPath}): the field and everything under it. */
  fields: string[];
  /** Field managers (`metadata.managedFields`): every field one of them owns on the live object. */
  managers: string[];
}

/** What a canary will ask of the plugin: slots always, and these. */
export interface RolloutPlan {
  /** Some step sets a weight: `setCandidateWeight`, or `scaleCandidate` for a plugin with the scale capability. */
  weights: boolean;
  /** `testers: true`: `routeTesters` will be called. */
  testers: boolean;
  /** Some step is a `set_header_route`: `setHeaderRoute` will be called. */
  headerRoutes?: boolean;
  /** Some step is a `set_mirror`: `setMirror` will be called. */
  mirror?: boolean;
  /** The percentages the `set_mirror` steps ask for, in step order (a plugin mirroring only some refuses the others at validate). */
  mirrorPercents?: number[];
  /** `session_affinity: true`: a client stays on the version it first reached while both run. */
  sessionAffinity?: boolean;
}

/** A `set_header_route` match: requests whose header (or cookie) `name` is exactly `value` go to the candidate. */
export interface HeaderRoute {
  type: "header" | "cookie";
  name: string;
  value: string;
}

/** Target outcomes. `ready` is what a dry-run reports for a target that would deploy. */
export const TargetStatus = {
  Deployed: "deployed",
  Ready: "ready",
  Failed: "failed",
  Skipped: "skipped",
  RolledBack: "rolled_back",
  Unchanged: "unchanged",
} as const;
export type TargetStatus = (typeof TargetStatus)[keyof typeof TargetStatus];

export interface TargetResult {
  /** The target the result is about, by its identity ({@link targetId}): its name, which is its host unless the envconfig names it. */
  host: string;
  status: TargetStatus;
  details?: Record<string, string>;
  duration_ms?: number;
  error?: string;
}

export interface Result {
  plugin: string;
  targets: TargetResult[];
  details?: Record<string, string>;
}

/** The release a target runs, as the plugin can tell it. `version` is "" when nothing is deployed. */
export interface TargetRelease {
  /** The target, by its identity ({@link targetId}), as in {@link TargetResult}. */
  host: string;
  version: string;
  details?: Record<string, string>;
}

export interface RollbackRequest extends Request {
  /** What each target ran before this deploy, as recorded in the checkpoint. */
  releases: TargetRelease[];
}

/** What `drift` finds on a target. `unknown`: the plugin cannot tell (nothing recorded to compare with, say); `details.reason` says why. */
export const DriftStatus = {
  InSync: "in_sync",
  Drifted: "drifted",
  Unknown: "unknown",
} as const;
export type DriftStatus = (typeof DriftStatus)[keyof typeof DriftStatus];

/** One difference between what was deployed and what runs: `Deployment/hello` `spec.replicas` 3 → 5, a file's sha256. */
export interface DriftChange {
  /** What differs: `Deployment/hello`, `ConfigMap/hello-config`, a file of the release (`index.html`), `current`. */
  object: string;
  /** Where in it: `spec.replicas`, `data.greeting`, `sha256`, `version`; "" for the whole object (missing, added). */
  field: string;
  /** What the recorded release has there ("" when it has nothing: an added file). */
  expected: string;
  /** What runs there now ("" when nothing does: a deleted object or file). */
  live: string;
}

/** A target's drift: what runs on it and whether that is still what manent deployed. */
export interface TargetDrift {
  /** The target, by its identity ({@link targetId}), as in {@link TargetResult}. */
  host: string;
  status: DriftStatus;
  /** The release the target runs now ("" when none). */
  version: string;
  changes: DriftChange[];
  /** Differences found but not drift: fields the envconfig's `drift.ignore` (or an autoscaler) leaves to others. */
  ignored?: IgnoredChange[];
  details?: Record<string, string>;
}

/** A difference drift does not count, and why (`drift.ignore.0`, `manager kube-controller-manager`, `HorizontalPodAutoscaler/hello`). */
export interface IgnoredChange extends DriftChange {
  reason: string;
}
