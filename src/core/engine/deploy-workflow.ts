import { dirname } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { ArtifactCache } from "../artifacts/artifact-cache.js";
import type { UploadStore } from "../artifacts/upload-store.js";
import { ArtifactPolicy } from "../artifacts/artifact-policy.js";
import type { Network } from "../artifacts/network.js";
import type {
  Artifact,
  Capability,
  Deployer,
  HostedPlugin,
  Logger,
  Request,
  Result,
  RolloutPlan,
  SecretsAccessor,
  Target,
  TargetRelease,
  TargetResult,
} from "../contract/index.js";
import { isDryRunner, isImageLister, isReleaseInspector, isRollbacker, ResultError, targetId } from "../contract/index.js";
import type { VerificationPolicy } from "../config/index.js";
import { deploySecretRefSchema, type CallbackEvent, type DeploySecretRef, type LoadedConfig } from "../config/index.js";
import { Code, ManentError, type ErrorJSON } from "../errors.js";
import { fetchArtifact, readSignature } from "./artifact-fetch.js";
import { policiesFor, verifyArtifact, wantsSignature } from "../verification/artifact-verifier.js";
import { imagesVerifiedByAll, verifyImages, type ImageRegistry } from "../verification/image-signatures.js";
import type { ArtifactVerification } from "../verification/verification-result.js";
import { noSecrets, openCallSecrets } from "./call-secrets.js";
import { sendCallback } from "./callbacks.js";
import { postWebhook } from "./webhook-poster.js";
import type { DeployStatus, DeployStore, NewDeploy } from "./deploy-store.js";
import type { EngineMetrics } from "./engine-metrics.js";
import type { PluginRegistry } from "./plugin-registry.js";
import { resolveSubmission, type ResolvedDeploy, type StepPolicy, type Submission } from "./resolve.js";
import { isCancellation, runStep, stoppedHere, type StepContext } from "./step-runner.js";
import type { CallScope, RolloutHost } from "../rollout/rollout-host.js";
import { runRollout } from "../rollout/rollout-runner.js";
import type { RolloutSettings } from "../rollout/rollout-config.js";
import type { DurableWaits } from "./durable-waits.js";
import { isUserCancel, userCancelled, type CancelWatch } from "./user-cancel.js";
import { TargetRecorder } from "./target-recorder.js";
import { mergeResults, pendingTargets } from "./target-resume.js";
import { deployPerTarget } from "./per-target-calls.js";
import type { DeployWindows } from "../windows/deploy-windows.js";
import { waitForWindow } from "../windows/window-wait.js";
import type { WindowOverrideStore, WindowOverrideWatch } from "../windows/window-overrides.js";

export interface DeployWorkflowInput {
  id: string;
  submission: Submission;
  /**
   * The deploy's record, written by the workflow itself when it starts (absent in workflows queued
   * by older servers): what the submission does not say (see {@link inputRecord}). Workflows queued
   * by older servers carry the whole record, its request and envconfig included: still read.
   */
  record?: InputRecord | NewDeploy;
}

/**
 * The record as the workflow input carries it: without what the input holds already (the id, the
 * request, which is the submission, and the envconfig's origin, which is in its resolved settings),
 * so a deploy's input does not keep its submission twice. {@link deployRecord} rebuilds the rest.
 */
export type InputRecord = Omit<NewDeploy, "id" | "request" | "envconfig">;

/** What of `record` the workflow input carries (see {@link InputRecord}). */
export function inputRecord(record: NewDeploy): InputRecord {
  const { id: _id, request: _request, envconfig: _envconfig, ...rest } = record;
  return rest;
}

/**
 * The deploy's record from its workflow input: the record itself in an input queued by an older
 * server, else rebuilt from the submission. Its request is the submission as submitted (without
 * the settings pinned at submission), as the submission wrote it.
 */
export function deployRecord(input: DeployWorkflowInput): NewDeploy | undefined {
  const { id, submission, record } = input;
  if (!record) return undefined;
  if ("request" in record) return record;
  const { resolved, windowed: _windowed, ...request } = submission;
  return { id, ...record, request, ...(resolved?.envconfigOrigin && { envconfig: resolved.envconfigOrigin }) };
}

export interface DeployOutcome {
  status: DeployStatus;
  error?: ErrorJSON;
}

export interface WorkflowDeps {
  config: LoadedConfig;
  store: DeployStore;
  plugins: PluginRegistry;
  logger: Logger;
  metrics: EngineMetrics;
  cancels: CancelWatch;
  /** Where the rollout's durable waits are counted, for a shutdown that does not wait for them. */
  waits: DurableWaits;
  /** Name lookups and HTTP requests to artifact URLs, callbacks, checks and webhooks. */
  network: Network;
  uploads?: UploadStore;
  /** The artifacts cache's bound; what a deploy fetched is held until it ends. */
  cache?: ArtifactCache;
  /** The deploy windows (deploy_windows in manent.yml) a deploy waits for before it takes a work slot. */
  windows?: DeployWindows;
  /** Container registries, read for image signatures. */
  imageRegistry?: ImageRegistry;
  /** Overrides an admin gives a deploy already waiting for its window. */
  windowOverrides?: { store: WindowOverrideStore; watch: WindowOverrideWatch };
  /** Told when a deploy run here has ended (its record written): see EngineOptions.onDeployEnded. */
  onDeployEnded?: (deployId: string) => void;
}

/** User-facing order of the steps. */
const seq = { resolve: 1, started: 2, fetch: 3, validate: 4, checkpoint: 5, deploy: 6, rollback: 7, finished: 8 } as const;
/** How often a deploy waiting for the one ahead of it looks again. */
const aheadRecheckMs = 200;
const once: StepPolicy = { maxRetries: 0, intervalMs: 0 };
/** How many times a gate of the deploy step is tried while the database does not answer (about 37 minutes of backoff in all, as when it was a DBOS step). */
const gateAttempts = 20;

/** The fetch step's output: the artifact, and what verified it when a policy wants a signature. */
type FetchedArtifact = Artifact & { verification?: ArtifactVerification[] };
/** A resolved deploy as its run goes on after the fetch step: the images verified then, which every later call is held to. */
type RunningDeploy = ResolvedDeploy & { verifiedImages?: string[] };

interface Checkpoint {
  releases: TargetRelease[];
  can_rollback: boolean;
  /** Why a failed deploy would not be rolled back, when it would not. */
  no_rollback_reason?: string;
}

/**
 * One deploy as a durable workflow: every phase a checkpointed step, so a server killed at any
 * point resumes after the last completed step. Status changes are idempotent writes, safe to repeat
 * when the workflow function is replayed after a crash.
 */
export class DeployWorkflow {
  /**
   * Per plugin, the capabilities this server last recorded (their JSON): written again only when
   * they change (a plugin restarted into another version), not once per deploy.
   */
  private readonly recordedCapabilities = new Map<string, string>();

  constructor(private readonly deps: WorkflowDeps) {}

  /**
   * Runs the deploy holding one of the server's work slots (work-slots.ts), given back while it
   * waits durably; dry runs have a queue of their own and take none.
   */
  async run(input: DeployWorkflowInput): Promise<DeployOutcome> {
    try {
      return await this.runWaitingForWindow(input);
    } catch (err) {
      // Woken after this server's DBOS stopped (a wait a shutdown did not wait for): nothing was recorded.
      if (stoppedHere()) this.deps.logger.info("deploy left to the next start: the server stopped while it waited", { deploy: input.id });
      throw err;
    }
  }

  private async runWaitingForWindow(input: DeployWorkflowInput): Promise<DeployOutcome> {
    const { windows } = this.deps;
    // Deploys (not dry runs or rollbacks) wait for their deploy window first, holding no slot; an
    // admin's override skips it. Decided by the input (`windowed`, set at submission), never by the
    // windows in force now: a replay after a restart with other windows takes the same steps.
    const { submission } = input;
    const record = deployRecord(input);
    if (windows && submission.windowed && submission.kind === "deploy" && record && !submission.window_override) {
      await waitForWindow({ ...this.deps, windows }, input.id, record, record);
    }
    const slots = this.deps.waits.slots;
    if (!slots || input.submission.kind === "dry_run") return this.runInSlot(input.id, submission, record);
    // Waiting for a slot is a durable wait too: a shutdown need not wait for it, and the record stays queued.
    await this.deps.waits.during(input.id, () => slots.acquire(input.id, record?.tenant ?? ""));
    try {
      return await this.runInSlot(input.id, submission, record);
    } finally {
      slots.release(input.id);
    }
  }

  private async runInSlot(id: string, submission: Submission, record: NewDeploy | undefined): Promise<DeployOutcome> {
    const { store } = this.deps;
    const startedAt = Date.now();
    // The record is created here if the submission did not get to write it.
    // The plugin the submission's resolve chose (what the resolve step below returns again) is recorded with the start.
    const pinnedPlugin = submission.resolved?.plugin;
    const { status, queuedMs } = await this.startWhenFirst(id, record, pinnedPlugin);
    if (status === "running" && queuedMs !== undefined) this.deps.metrics.deployStarted(submission.kind, queuedMs / 1000);
    // Cancelled while it was queued (or ended by a previous run of this workflow): nothing runs.
    if (status !== "running") return { status: status ?? "failed" };
    let r: ResolvedDeploy;
    try {
      // A rollback's version was fixed at submission (Submission.to), so resolving again keeps it.
      r = await this.step(id, seq.resolve, "resolve", once, () =>
        resolveSubmission(this.deps.config, this.deps.plugins, submission, this.deps),
      );
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (isUserCancel(err)) return this.finish(id, submission.kind, "cancelled", cancelledBefore(submission.kind), startedAt);
      return this.finish(id, submission.kind, "failed", err, startedAt);
    }
    // A workflow queued without its resolved settings (by an older version) learns its plugin only now.
    if (r.plugin !== pinnedPlugin) await store.setStatus(id, "running", { plugin: r.plugin });
    const plugin = this.deps.plugins.get(r.plugin);
    if (!plugin) {
      const err = new ManentError(Code.FailedPrecondition, `plugin ${r.plugin} is no longer configured in ${this.deps.config.file}`);
      return this.finish(id, r.kind, "failed", err, startedAt);
    }
    if (r.kind !== "dry_run") await this.callbacks(id, r, "started", "running", null);

    let outcome: { status: DeployStatus; error?: ManentError };
    try {
      outcome = r.kind === "rollback" ? await this.rollbackRun(id, r, plugin) : await this.deployRun(id, r, plugin);
    } catch (err) {
      if (isCancellation(err)) throw err;
      outcome = isUserCancel(err)
        ? { status: "cancelled", error: cancelledBefore(r.kind) }
        : { status: "failed", error: ManentError.from(err) };
    } finally {
      this.deps.cache?.release(id);
    }
    if (r.kind !== "dry_run") {
      const event: CallbackEvent =
        outcome.status === "succeeded" ? "succeeded" : outcome.status === "rolled_back" ? "rolled_back" : "failed";
      await this.callbacks(id, r, event, outcome.status, outcome.error?.toJSON() ?? null);
    }
    return this.finish(id, r.kind, outcome.status, outcome.error, startedAt);
  }

  /**
   * Marks the deploy running once no other deploy of its key runs (see `DeployStore.startRun`). The
   * wait is rare (two servers dequeuing one key at once) and holds nothing: it polls, calls no
   * DBOS function (a replay takes the same steps), and a shutdown need not wait for it.
   */
  private async startWhenFirst(
    id: string,
    record: NewDeploy | undefined,
    plugin: string | undefined,
  ): Promise<{ status: DeployStatus | undefined; queuedMs?: number | undefined }> {
    let start = await this.deps.store.startRun(id, record, plugin);
    if (start.behind === undefined) return start;
    this.deps.logger.info("deploy waits for the one ahead of it", { deploy: id, behind: start.behind });
    return this.deps.waits.during(id, async () => {
      while (start.behind !== undefined) {
        await delay(aheadRecheckMs);
        start = await this.deps.store.startRun(id, record, plugin);
      }
      return start;
    });
  }

  private async deployRun(id: string, r: ResolvedDeploy, plugin: HostedPlugin): Promise<{ status: DeployStatus; error?: ManentError }> {
    // The operator's verification policies as manent.yml says now: a deploy resolved before a policy was added is held to it too.
    const policies = policiesFor(this.deps.config.verification, r);
    // image_digests: the kubernetes plugin's own check, forced on whatever the envconfig's params say (image_signatures implies it).
    const forced: Record<string, string> =
      r.plugin === "kubernetes" && policies.some((p) => p.image_digests || p.image_signatures) ? { require_image_digest: "true" } : {};
    // image_signatures: the images the kubernetes manifests run, each signed in its registry.
    const imagePolicies = r.plugin === "kubernetes" ? policies.filter((p) => p.image_signatures) : [];
    const fetched = await this.step(id, seq.fetch, "fetch", r.steps.fetch, async (stepCtx): Promise<FetchedArtifact> => {
      const { signal } = stepCtx;
      const ctx = {
        config: this.deps.config,
        tenant: r.tenant,
        network: this.deps.network,
        ...(this.deps.uploads && { uploads: this.deps.uploads }),
        ...(this.deps.cache && { cache: { cache: this.deps.cache, holder: id } }),
      };
      const artifact = await fetchArtifact(r.artifact, ctx, signal);
      if (!policies.some(wantsSignature) && imagePolicies.length === 0) return artifact;
      // Verified before the plugin sees it: a refusal ends the deploy before validate, with no target touched.
      const verification = policies.some(wantsSignature)
        ? await verifyArtifact({
            artifact: artifact as Artifact & { sha256: string; path: string },
            signature: await readSignature(artifact, ctx, signal),
            policies,
            configFile: this.deps.config.file,
            baseDir: this.deps.config.baseDir,
          })
        : [];
      if (imagePolicies.length > 0)
        verification.push(
          ...(await this.verifyImages(id, { ...r, artifact, params: { ...r.params, ...forced } }, plugin, imagePolicies, stepCtx)),
        );
      return { ...artifact, verification };
    });
    const { verification, ...artifact } = fetched;
    // Held again when the fetch step is replayed from its checkpoint (a resumed deploy).
    if (artifact.path) this.deps.cache?.hold(id, dirname(artifact.path));
    const resolved: RunningDeploy = {
      ...r,
      artifact,
      params: { ...r.params, ...forced },
      ...(imagePolicies.length > 0 && { verifiedImages: imagesVerifiedByAll(imagePolicies, verification ?? []) }),
    };
    const caps = await this.validate(id, resolved, plugin);

    if (r.kind === "dry_run") {
      const deployer = await plugin.deployer();
      if (!caps.includes("dry_run") || !isDryRunner(deployer)) {
        await this.deps.store.stepStarted(id, seq.deploy, "deploy");
        await this.deps.store.stepFinished(id, "deploy", "skipped", {
          plugin: plugin.name,
          targets: [],
          details: { dry_run: "the plugin has no dry-run: stopped at validation" },
        } satisfies Result);
        return { status: "succeeded" };
      }
      await this.step(id, seq.deploy, "deploy", r.steps.deploy, (ctx) =>
        this.call(id, "dry_run", resolved, caps, ctx, true, (req) => deployer.dryRun(req)),
      );
      return { status: "succeeded" };
    }

    const checkpoint = await this.step(id, seq.checkpoint, "checkpoint", r.steps.checkpoint, async (ctx): Promise<Checkpoint> => {
      const releases = await this.currentReleases(id, resolved, plugin, caps, ctx);
      const reason = !r.rollbackEnabled
        ? "rollback.enabled is false in the envconfig"
        : !caps.includes("rollback")
          ? `plugin ${plugin.name} cannot roll back`
          : undefined;
      return reason ? { releases, can_rollback: false, no_rollback_reason: reason } : { releases, can_rollback: true };
    });

    if (!(await this.gate(id, "begin", () => this.deps.store.beginDeployStep(id, checkpoint.no_rollback_reason ?? null))))
      throw userCancelled();
    if (r.rollout?.waves || r.rollout?.canary || r.rollout?.post_promotion_analysis) {
      const out = await runRollout(this.rolloutHost(id, resolved, plugin, caps), checkpoint);
      return out.status === "succeeded" ? this.commit(id, resolved, plugin, caps, checkpoint) : out;
    }

    try {
      await this.deployTargets(id, resolved, plugin, caps, "deploy", r.targets, { soleDeployStep: true });
      return await this.commit(id, resolved, plugin, caps, checkpoint);
    } catch (err) {
      if (isCancellation(err)) throw err;
      const failure = ManentError.from(err);
      if (isUserCancel(failure)) return this.cancelledDuringDeploy(id, resolved, plugin, caps, checkpoint);
      if (!checkpoint.can_rollback) return { status: "failed", error: failure };
      try {
        await this.rollbackStep(id, resolved, plugin, caps, checkpoint.releases);
        return {
          status: "rolled_back",
          error: new ManentError(failure.code, `${failure.message}; rollback completed`, { details: failure.details }),
        };
      } catch (rollbackErr) {
        if (isCancellation(rollbackErr)) throw rollbackErr;
        const e = ManentError.from(rollbackErr);
        return {
          status: "failed",
          error: new ManentError(failure.code, `${failure.message}; rollback failed: ${e.message}`, { details: failure.details }),
        };
      }
    }
  }

  /**
   * Deploys `targets` with the plugin as one step: the unit a deploy runs, once or once per wave.
   * Run again (after a crash or a failed attempt), it gives the plugin only the targets not done yet.
   * `soleDeployStep`: no other step of the deploy records targets of its phase (a deploy without a
   * rollout), so the step's first run has none to look up.
   */
  private deployTargets(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    name: string,
    targets: Target[],
    opts: { soleDeployStep?: boolean } = {},
  ): Promise<Result> {
    return this.resumableDeploy(id, r, plugin, caps, name, { targets }, (deployer, req) => deployer.deploy(req), opts);
  }

  /**
   * A call that changes targets (a deploy, a canary's DeployCandidate) as one step: run again, it
   * gives the plugin only the targets of `scope` not done yet, and keeps the others' recorded results.
   */
  private resumableDeploy(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    name: string,
    scope: CallScope,
    fn: (deployer: Deployer, req: Request) => Promise<Result>,
    opts: { soleDeployStep?: boolean } = {},
  ): Promise<Result> {
    const { targets } = scope;
    return this.step(id, seq.deploy, name, r.steps.deploy, async (ctx) => {
      const deployer = await plugin.deployer();
      // A read saved: nothing can have recorded this step's targets before its first run.
      const { done, todo } =
        opts.soleDeployStep && ctx.firstRun ? { done: [], todo: targets } : await pendingTargets(this.deps.store, id, "deploy", targets);
      if (done.length > 0) this.deps.logger.info("deploy step resumed", { deploy: id, step: name, done: done.length, left: todo.length });
      if (todo.length === 0) return { plugin: plugin.name, targets: done };
      try {
        // An external plugin reports its targets only when a call returns: one call per target lets each be recorded as it finishes.
        const call = (req: Request): Promise<Result> =>
          plugin.kind === "external" ? deployPerTarget(deployer, req, (one) => fn(deployer, one)) : fn(deployer, req);
        return mergeResults(targets, done, await this.call(id, "deploy", r, caps, ctx, true, call, { ...scope, targets: todo }));
      } catch (err) {
        if (err instanceof ResultError && done.length > 0) throw new ResultError(err, mergeResults(targets, done, err.result));
        throw err;
      }
    });
  }

  private rolloutHost(id: string, r: ResolvedDeploy, plugin: HostedPlugin, caps: Capability[]): RolloutHost {
    const outbound = new ArtifactPolicy({ ...this.deps.config, lookup: this.deps.network.lookup }).outbound(this.deps.network);
    return {
      id,
      r,
      plugin,
      caps,
      store: this.deps.store,
      metrics: this.deps.metrics,
      logger: this.deps.logger,
      waits: this.deps.waits,
      outbound,
      postWebhook: (w) => postWebhook(w, outbound),
      step: (name, policy, fn) => this.step(id, seq.deploy, name, policy, fn),
      call: async (phase, ctx, scope, fn) => {
        const deployer = await plugin.deployer();
        return this.call(id, phase, r, caps, ctx, true, (req) => fn(deployer, req), scope);
      },
      deployTargets: (name, targets) => this.deployTargets(id, r, plugin, caps, name, targets),
      deployStep: (name, scope, fn) => this.resumableDeploy(id, r, plugin, caps, name, scope, fn),
      rollbackTargets: (targets, releases) => this.rollbackStep(id, r, plugin, caps, releases, targets),
    };
  }

  /**
   * A user's cancel taken while the deploy step ran: the targets are rolled back to the checkpoint
   * (status `rolled_back`), or, when the deploy cannot roll back, the deploy ends `failed` naming the
   * targets that run the new version: `cancelled` is kept for deploys that changed nothing.
   */
  private async cancelledDuringDeploy(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    checkpoint: Checkpoint,
    what = "cancelled by a user during the deploy step",
  ): Promise<{ status: DeployStatus; error: ManentError }> {
    const canceled = (message: string): ManentError => new ManentError(Code.Canceled, message, { details: { cancelled_by: "user" } });
    if (!checkpoint.can_rollback) {
      const deployed = ((await this.deps.store.getDeploy(id))?.targets ?? [])
        .filter((t) => t.phase === "deploy" && t.status === "deployed")
        .map((t) => t.host);
      const where = deployed.length ? `${deployed.join(", ")} run version ${r.artifact.version}` : "no target was deployed";
      return {
        status: "failed",
        error: canceled(`${what}; not rolled back (${checkpoint.no_rollback_reason ?? "no rollback"}): ${where}`),
      };
    }
    try {
      await this.rollbackStep(id, r, plugin, caps, checkpoint.releases);
      return { status: "rolled_back", error: canceled(`${what}; rollback to the checkpoint completed`) };
    } catch (rollbackErr) {
      if (isCancellation(rollbackErr)) throw rollbackErr;
      return { status: "failed", error: canceled(`${what}; rollback failed: ${ManentError.from(rollbackErr).message}`) };
    }
  }

  /**
   * The gate after the deploy step: the deploy is committed to its new release, unless a cancel
   * was taken between the end of the plugin's calls and here; that cancel is honoured by a
   * rollback (or, when the deploy cannot roll back, the deploy stays deployed and says so).
   */
  private async commit(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    checkpoint: Checkpoint,
  ): Promise<{ status: DeployStatus; error?: ManentError }> {
    if (await this.gate(id, "commit", () => this.deps.store.commitDeployStep(id))) return { status: "succeeded" };
    if (!checkpoint.can_rollback) {
      this.deps.logger.warn("a cancel arrived as the deploy step finished and the deploy cannot roll back: it stays deployed", {
        deploy: id,
      });
      return { status: "succeeded" };
    }
    return this.cancelledDuringDeploy(id, r, plugin, caps, checkpoint, "cancelled by a user as the deploy step finished");
  }

  /**
   * A gate of the deploy step. Its answer needs no checkpoint of its own (it was a DBOS step, four
   * commits more): it is written in the record by one conditional statement, and both flags it reads
   * only ever get set (a cancel is never withdrawn, a gate passed stays passed), so a replay after a
   * crash gets the same answer and takes the same branch. Tried again while the database is out.
   */
  private async gate(id: string, name: "begin" | "commit", fn: () => Promise<boolean>): Promise<boolean> {
    for (let attempt = 1, waitMs = 500; ; attempt++, waitMs *= 1.5) {
      try {
        return await fn();
      } catch (err) {
        if (attempt >= gateAttempts) throw err;
        this.deps.logger.warn("deploy gate: the database did not answer, trying again", {
          deploy: id,
          gate: name,
          error: ManentError.from(err).message,
        });
        await delay(waitMs);
      }
    }
  }

  /** A rollback asked for by a user: back to `r.to` on every target, without fetching anything. */
  private async rollbackRun(id: string, r: ResolvedDeploy, plugin: HostedPlugin): Promise<{ status: DeployStatus; error?: ManentError }> {
    const to = r.to!;
    const resolved: ResolvedDeploy = { ...r, artifact: { ...r.artifact, version: to } };
    const caps = await this.validate(id, resolved, plugin);
    if (!caps.includes("rollback")) {
      throw new ManentError(Code.Unimplemented, `plugin ${plugin.name} cannot roll back (it does not declare the rollback capability)`);
    }
    await this.step(id, seq.checkpoint, "checkpoint", r.steps.checkpoint, async (ctx): Promise<Checkpoint> => ({
      releases: await this.currentReleases(id, resolved, plugin, caps, ctx),
      can_rollback: true,
    }));
    // Once the rollback step starts, a cancel is refused: stopping it would leave the targets mixed.
    if (!(await this.gate(id, "begin", () => this.deps.store.beginDeployStep(id, "a rollback that has started is not interrupted"))))
      throw userCancelled();
    await this.rollbackStep(
      id,
      resolved,
      plugin,
      caps,
      r.targets.map((t) => ({ host: targetId(t), version: to })),
    );
    return { status: "succeeded" };
  }

  /** What each target runs now, when the plugin can tell; none otherwise. */
  private async currentReleases(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    ctx: StepContext,
  ): Promise<TargetRelease[]> {
    const deployer = await plugin.deployer();
    if (!caps.includes("current_release") || !isReleaseInspector(deployer)) return [];
    return this.call(id, "checkpoint", r, caps, ctx, true, (req) => deployer.currentRelease(req));
  }

  /** The rollback step: every target back to `releases` (the checkpoint's, or the version a user asked for). */
  private rollbackStep(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    caps: Capability[],
    releases: TargetRelease[],
    targets = r.targets,
  ): Promise<Result> {
    return this.step(id, seq.rollback, "rollback", r.steps.rollback, async (ctx) => {
      const deployer = await plugin.deployer();
      if (!isRollbacker(deployer)) throw new ManentError(Code.Unimplemented, `plugin ${plugin.name} cannot roll back`);
      return this.call(id, "rollback", r, caps, ctx, true, (req) => deployer.rollback({ ...req, releases }), { targets });
    });
  }

  /** The plugin lists the artifact's images (no target touched); each must be signed as the policies say. */
  private async verifyImages(
    id: string,
    r: ResolvedDeploy,
    plugin: HostedPlugin,
    policies: VerificationPolicy[],
    ctx: StepContext,
  ): Promise<ArtifactVerification[]> {
    const deployer = await plugin.deployer();
    if (!isImageLister(deployer) || !this.deps.imageRegistry) {
      throw new ManentError(
        Code.FailedPrecondition,
        `plugin ${plugin.name} cannot list its artifact's images, which verification policy ${policies[0]!.name} checks`,
      );
    }
    // With secrets: a chart is rendered for each cluster, reached with its credentials.
    const images = await this.call(id, "images", r, [], ctx, true, (req) => deployer.images(req));
    return verifyImages({
      images,
      policies,
      registry: this.deps.imageRegistry,
      configFile: this.deps.config.file,
      baseDir: this.deps.config.baseDir,
      signal: ctx.signal,
    });
  }

  private async validate(id: string, r: ResolvedDeploy, plugin: HostedPlugin): Promise<Capability[]> {
    const out = await this.step(id, seq.validate, "validate", r.steps.validate, async (ctx) => {
      const deployer = await plugin.deployer();
      const capabilities = await plugin.capabilities();
      const seen = JSON.stringify(capabilities);
      if (this.recordedCapabilities.get(plugin.name) !== seen) {
        await this.deps.store.saveCapabilities(plugin.name, capabilities);
        this.recordedCapabilities.set(plugin.name, seen);
      }
      await this.call(id, "validate", r, capabilities, ctx, false, (req) => deployer.validate(req));
      return { plugin: plugin.name, capabilities };
    });
    return out.capabilities;
  }

  /** Calls the plugin with a request for this phase; secrets are open only during the call. */
  private async call<T>(
    id: string,
    phase: string,
    r: RunningDeploy,
    caps: Capability[],
    ctx: StepContext,
    withSecrets: boolean,
    fn: (req: Request) => Promise<T>,
    scope?: CallScope,
  ): Promise<T> {
    const refs = new Map<string, DeploySecretRef>(r.secrets.map((s) => [s.name, deploySecretRefSchema.parse(s.ref)]));
    const secrets = withSecrets ? openCallSecrets(refs, phase, this.deps.config.secretStores) : undefined;
    const recorder = new TargetRecorder(this.deps.store, id, phase, this.deps.logger);
    const seen = new Set<string>();
    const record = (t: TargetResult): void => {
      seen.add(t.host);
      this.deps.metrics.targetFinished(r.plugin, phase, t);
      recorder.add(t);
    };
    const req: Request = {
      deploymentId: id,
      tenant: r.tenant,
      application: r.application,
      environment: r.environment,
      artifact: r.artifact,
      targets: scope?.targets ?? r.targets,
      ...(scope?.traffic && { traffic: scope.traffic }),
      ...(r.rollout?.canary && { rollout: rolloutPlan(r.rollout.canary) }),
      ...(r.drift?.ignore?.length && { ignore: r.drift.ignore }),
      ...(r.verifiedImages && { verifiedImages: r.verifiedImages }),
      params: r.params,
      secrets: secrets?.accessor ?? (noSecrets(phase) satisfies SecretsAccessor),
      parallelism: caps.includes("parallel_targets") ? r.parallel : 1,
      logger: this.deps.logger,
      signal: ctx.signal,
      progress: record,
    };
    try {
      const out = await fn(req);
      if (isResult(out)) for (const t of out.targets) if (!seen.has(t.host)) record(t);
      return out;
    } catch (err) {
      if (err instanceof ResultError) for (const t of err.result.targets) if (!seen.has(t.host)) record(t);
      throw err;
    } finally {
      secrets?.close();
      await recorder.settled();
    }
  }

  private async callbacks(id: string, r: ResolvedDeploy, event: CallbackEvent, status: string, error: ErrorJSON | null): Promise<void> {
    const subscribed = r.callbacks.map((c, i) => ({ c, i })).filter(({ c }) => c.events.includes(event));
    for (const { c, i } of subscribed) {
      const payload = {
        event,
        deploy: {
          id,
          kind: r.kind,
          tenant: r.tenant,
          application: r.application,
          artifact: r.artifact.name,
          environment: r.environment,
          version: r.kind === "rollback" ? (r.to ?? r.artifact.version) : r.artifact.version,
          plugin: r.plugin,
          status,
          error,
        },
        sent_at: new Date().toISOString(),
      };
      try {
        await this.step(
          id,
          event === "started" ? seq.started : seq.finished,
          `callback:${event}:${i}`,
          { maxRetries: c.max_retries, intervalMs: r.steps.deploy.intervalMs },
          ({ signal }) => sendCallback(c, payload, signal, this.deps.config, this.deps.network),
        );
      } catch (err) {
        if (isCancellation(err)) throw err;
        // A receiver that is down must not fail or roll back a deploy; the step record keeps the error.
        this.deps.logger.warn("callback failed", { deploy: id, url: c.url, event, error: ManentError.from(err).message });
      }
    }
  }

  private step<T>(id: string, n: number, name: string, policy: StepPolicy, fn: (ctx: StepContext) => Promise<T>): Promise<T> {
    // Rollbacks, a canary's revert and callbacks run to their end: a cancel is what they carry out or report.
    const cancellable = !/(^|:)(rollback|revert)/.test(name) && !name.startsWith("callback:");
    return runStep(this.deps, id, n, name, policy, fn, cancellable);
  }

  private async finish(
    id: string,
    kind: ResolvedDeploy["kind"],
    status: DeployStatus,
    error: unknown,
    startedAt: number,
  ): Promise<DeployOutcome> {
    const e = error === undefined ? undefined : ManentError.from(error).toJSON();
    await this.deps.store.setStatus(id, status, { error: e ?? null });
    this.deps.metrics.deployFinished(kind, status, (Date.now() - startedAt) / 1000);
    this.deps.onDeployEnded?.(id);
    this.deps.logger.info("deploy finished", { deploy: id, kind, status, ...(e && { error: e.message }) });
    return e ? { status, error: e } : { status };
  }
}

function cancelledBefore(kind: ResolvedDeploy["kind"]): ManentError {
  const what =
    kind === "dry_run"
      ? "cancelled by a user; a dry run changes nothing"
      : "cancelled by a user before the deploy step: the targets were not changed";
  return new ManentError(Code.Canceled, what, { details: { cancelled_by: "user" } });
}

/** What the canary will ask of the plugin, sent with every call (validate and dry-run included) so the plugin can check it first. */
function rolloutPlan(canary: NonNullable<RolloutSettings["canary"]>): RolloutPlan {
  return {
    weights: canary.steps.some((s) => "set_weight" in s),
    testers: canary.testers,
    headerRoutes: canary.steps.some((s) => "set_header_route" in s),
    mirror: canary.steps.some((s) => "set_mirror" in s),
    mirrorPercents: canary.steps.flatMap((s) => ("set_mirror" in s ? [s.set_mirror] : [])),
    sessionAffinity: canary.session_affinity,
  };
}

function isResult(v: unknown): v is Result {
  return typeof v === "object" && v !== null && Array.isArray((v as Result).targets);
}
