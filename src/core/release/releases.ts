import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { settleOtherVersionReleases } from "./release-upgrade.js";
import { z } from "zod";
import type { Network } from "../artifacts/network.js";
import type { UploadStore } from "../artifacts/upload-store.js";
import { artifactSchema, descriptorSchema, findEnvconfig, validate, type LoadedConfig } from "../config/index.js";
import type { Artifact, Logger } from "../contract/index.js";
import { checkArtifactSource, uploadOf } from "../engine/artifact-fetch.js";
import { terminalStatuses } from "../engine/deploy-store.js";
import type { Engine } from "../engine/engine.js";
import type { PluginRegistry } from "../engine/plugin-registry.js";
import { resolveSubmission } from "../engine/resolve.js";
import { Code, ManentError } from "../errors.js";
import { checkApprover, type Actor } from "../rollout/approvals.js";
import { wakeLocalReceiver } from "../rollout/rollout-commands.js";
import { findPipeline, pipelineEnvironments, type Pipeline } from "./pipeline.js";
import { releaseTopic, type ReleaseCommand } from "./release-inbox.js";
import { terminalReleaseStatuses, type NewRelease, type ReleaseRecord, type ReleaseStore } from "./release-store.js";
import { ReleaseWorkflow, type ReleaseOutcome, type ReleaseWorkflowInput } from "./release-workflow.js";

export interface ReleasesOptions {
  config: LoadedConfig;
  engine: Engine;
  store: ReleaseStore;
  plugins: PluginRegistry;
  logger: Logger;
  network: Network;
  uploads?: UploadStore;
}

/** What a client asks for: a descriptor (its environment is not used: the pipeline says where) and the CLI's overrides. */
export interface ReleaseRequest {
  descriptor: unknown;
  descriptorFile: string;
  overrides?: { version?: string; source?: string; sha256?: string };
}

/** A request checked against the application's pipeline, ready to start once the caller is authorized for its environments. */
export interface PlannedRelease {
  tenant: string;
  application: string;
  artifact: Artifact;
  pipeline: Pipeline;
  pipelineFile: string;
  descriptorFile: string;
  environments: string[];
}

/*
 * DBOS keeps its registry in process-wide statics: the workflow function is registered when this
 * module loads (before launch), and waits for the releases of this process to be attached: DBOS
 * recovers the releases a crash cut at its launch, before the server has attached them.
 */
let attached: ReleaseWorkflow | undefined;
let whenAttached: Promise<ReleaseWorkflow> | undefined;
let attach: ((w: ReleaseWorkflow) => void) | undefined;
const workflowReady = (): Promise<ReleaseWorkflow> =>
  attached ? Promise.resolve(attached) : (whenAttached ??= new Promise<ReleaseWorkflow>((r) => (attach = r)));
export const releaseWorkflowName = "manent.release";
const releaseWorkflow = DBOS.registerWorkflow(
  async (input: ReleaseWorkflowInput): Promise<ReleaseOutcome> => (await workflowReady()).run(input),
  { name: releaseWorkflowName, maxRecoveryAttempts: 1000 },
);

const overridden = z.object({ artifact: artifactSchema });
const releaseDescriptor = descriptorSchema.partial({ environment: true });

/** Releases of one server: started, cancelled, approved and promoted here; run by the workflow above. */
export class Releases {
  /**
   * The async context releases start in: the server's own, not the request's that submitted them,
   * so a release's log lines (it runs for hours) do not name that request.
   */
  private readonly outsideRequests = AsyncLocalStorage.snapshot();

  private constructor(private readonly opts: ReleasesOptions) {}

  static attach(opts: ReleasesOptions): Releases {
    attached = new ReleaseWorkflow(opts);
    attach?.(attached);
    return new Releases(opts);
  }

  /** Running releases of another manent build on `executorIds` end with a clear record (see release-upgrade.ts). */
  async settleOtherVersions(executorIds: string[]): Promise<void> {
    await settleOtherVersionReleases({
      version: this.opts.engine.applicationVersion,
      workflowName: releaseWorkflowName,
      executorIds,
      store: this.opts.store,
      logger: this.opts.logger,
    });
  }

  /** Forgets this process's releases (the engine has shut down). */
  static detach(): void {
    attached = undefined;
    whenAttached = undefined;
    attach = undefined;
  }

  /**
   * Checks a request before anything is recorded: the descriptor and overrides, the artifact's
   * source, the application's pipeline.yml, and every environment's envconfig (a release that could
   * not deploy to prod is refused now, not after dev). Every problem is `invalid_argument` naming file, field and reason.
   */
  async plan(req: ReleaseRequest): Promise<PlannedRelease> {
    const { config, uploads, network } = this.opts;
    const descriptor = validate(req.descriptor, req.descriptorFile, releaseDescriptor);
    const { artifact } = validate(
      {
        artifact: {
          ...descriptor.artifact,
          ...(req.overrides?.version !== undefined && { version: req.overrides.version }),
          ...(req.overrides?.source !== undefined && { source: req.overrides.source, sha256: undefined }),
          ...(req.overrides?.sha256 !== undefined && { sha256: req.overrides.sha256 }),
        },
      },
      `${req.descriptorFile} (with --version/--source/--sha256)`,
      overridden,
    );
    await checkArtifactSource(artifact, { config, tenant: descriptor.tenant, network, ...(uploads && { uploads }) }).catch(
      (err: unknown) => {
        const e = ManentError.from(err);
        throw new ManentError(e.code, `${req.descriptorFile}: ${e.message}`, { details: { file: req.descriptorFile, ...e.details } });
      },
    );
    const { pipeline, file } = await findPipeline(config, descriptor.tenant, descriptor.application);
    const environments = pipelineEnvironments(pipeline);
    await this.checkEnvironments({ ...descriptor, artifact }, req.descriptorFile, pipeline, file, environments);
    return {
      tenant: descriptor.tenant,
      application: descriptor.application,
      artifact,
      pipeline,
      pipelineFile: file,
      descriptorFile: req.descriptorFile,
      environments,
    };
  }

  /**
   * Each environment resolves with its envconfig (plugin, targets, secrets), and the analysis checks
   * its stage names are in that envconfig: `invalid_argument` naming file, field and reason.
   */
  private async checkEnvironments(
    descriptor: { tenant: string; application: string; artifact: Artifact } & Record<string, unknown>,
    descriptorFile: string,
    pipeline: Pipeline,
    file: string,
    environments: string[],
  ): Promise<void> {
    const { config, plugins } = this.opts;
    const { artifact } = descriptor;
    for (const environment of environments) {
      const r = await resolveSubmission(
        config,
        plugins,
        { kind: "deploy", descriptor: { ...descriptor, environment }, descriptorFile },
        this.opts,
      );
      const stageIndex = pipeline.stages.findIndex((s) => s.environments.includes(environment));
      const wanted = pipeline.stages[stageIndex]!.analysis?.checks ?? [];
      if (wanted.length === 0) continue;
      const key = { tenant: descriptor.tenant, application: descriptor.application, artifact: artifact.name, environment };
      const defined = (await findEnvconfig(config, key)).envconfig.analysis?.checks ?? {};
      for (const [i, check] of wanted.entries()) {
        if (defined[check]) continue;
        throw new ManentError(
          Code.InvalidArgument,
          `${file}: stages.${stageIndex}.analysis.checks.${i}: no check named "${check}" in analysis.checks of ${r.envconfigFile ?? environment}`,
          { details: { file, field: `stages.${stageIndex}.analysis.checks.${i}` } },
        );
      }
    }
  }

  /**
   * A retry of a release that failed or was cancelled (`manent release retry`): a new release of the
   * same artifact, pinned by the sha256 the retried one used, through the pipeline it recorded (not
   * today's pipeline.yml: the stages it passed are the ones skipped), starting at the stage where it
   * stopped. The stages before are carried over as done by the release that deployed them; the
   * others run as in any release, each environment with its envconfig as it is when its stage deploys.
   * Refused (412 failed_precondition) for a release that is running or succeeded, or whose artifact
   * can no longer be fetched; the environments still to deploy are checked now, as at a start.
   */
  async retry(
    r: ReleaseRecord,
    submitter: { name: string; id: string },
    id: string = randomUUID(),
  ): Promise<{ id: string; from_stage: number }> {
    // The one retry of a release is the way on: its own retry when it fails too.
    if (r.retried_by.length > 0) throw alreadyRetried(r.id, r.retried_by[0]!);
    if (r.status !== "failed" && r.status !== "cancelled") {
      const what = r.status === "running" ? "wait for it to end, or cancel it" : "start a new release to deploy again";
      throw new ManentError(
        Code.FailedPrecondition,
        `release ${r.id} is ${r.status}: only a failed or cancelled release is retried (${what})`,
        { details: { release: r.id, status: r.status } },
      );
    }
    const submitted = await this.opts.store.releaseSubmission(r.id);
    const from = r.stages.findIndex((s) => s.status !== "succeeded");
    if (!submitted || from < 0) {
      throw new ManentError(
        Code.FailedPrecondition,
        `release ${r.id} cannot be retried: its record has no ${submitted ? "stage left to run" : "artifact"}`,
        {
          details: { release: r.id },
        },
      );
    }
    const artifact: Artifact = { ...submitted.artifact, ...(r.sha256 && { sha256: r.sha256 }) };
    const { config, uploads, network } = this.opts;
    await checkArtifactSource(artifact, { config, tenant: r.tenant, network, ...(uploads && { uploads }) }).catch((err: unknown) => {
      const pinned = artifact.sha256 ? ` (sha256 ${artifact.sha256})` : "";
      throw new ManentError(
        Code.FailedPrecondition,
        `release ${r.id} cannot be retried: artifact ${artifact.name} ${artifact.version}${pinned} can no longer be fetched: ${ManentError.from(err).message}`,
        { cause: err, details: { release: r.id, artifact: artifact.name } },
      );
    });
    const descriptor = { apiVersion: "manent/v1", tenant: r.tenant, application: r.application, artifact };
    const remaining = r.pipeline.stages.slice(from).flatMap((s) => s.environments);
    await this.checkEnvironments(descriptor, submitted.descriptor_file, r.pipeline, r.pipeline_file, remaining);
    const holder = await this.opts.store.claimRetry(r.id, id);
    if (holder !== id) throw alreadyRetried(r.id, holder);
    await this.launch({
      id,
      tenant: r.tenant,
      application: r.application,
      artifact,
      pipeline: r.pipeline,
      pipeline_file: r.pipeline_file,
      descriptor_file: submitted.descriptor_file,
      submitted_by: submitter.name,
      submitted_by_id: submitter.id,
      // A stage a retry carried over keeps naming the release that deployed it.
      retry: { of: r.id, done: r.stages.slice(0, from).map((s) => ({ ...s, done_by: s.done_by ?? r.id })) },
    });
    return { id, from_stage: from + 1 };
  }

  /** Starts a planned release: its workflow first (it records itself), then its record. */
  async start(plan: PlannedRelease, submitter: { name: string; id: string }, id: string = randomUUID()): Promise<{ id: string }> {
    await this.launch({
      id,
      tenant: plan.tenant,
      application: plan.application,
      artifact: plan.artifact,
      pipeline: plan.pipeline,
      pipeline_file: plan.pipelineFile,
      descriptor_file: plan.descriptorFile,
      submitted_by: submitter.name,
      submitted_by_id: submitter.id,
    });
    return { id };
  }

  /** A release's workflow first (it records itself), then its record. */
  private async launch(release: NewRelease): Promise<void> {
    const { id } = release;
    const queue = async () => {
      await this.outsideRequests(() => DBOS.startWorkflow(releaseWorkflow, { workflowID: id })({ release }));
    };
    const { uploads } = this.opts;
    const upload = uploadOf(release.artifact);
    const by = {
      id,
      application: release.application,
      artifact: release.artifact.name,
      environment: pipelineEnvironments(release.pipeline).join(","),
      version: release.artifact.version,
    };
    try {
      // Started with its upload claimed and no deletion running: the claim keeps it until the release's record does.
      await (upload && uploads ? uploads.whileClaimed(release.tenant, upload, by, queue) : queue());
    } catch (err) {
      if (err instanceof ManentError && err.code === Code.InvalidArgument) {
        throw new ManentError(err.code, `${release.descriptor_file}: ${err.message}`, {
          details: { file: release.descriptor_file, ...err.details },
        });
      }
      throw new ManentError(Code.Unavailable, `release ${id} could not be started: ${ManentError.from(err).message}`, { cause: err });
    }
    await this.opts.store.createRelease(release);
  }

  /**
   * A user's cancel: the release stops at its next wait or once the deploy it runs ends; that deploy
   * is cancelled too (with what a deploy's cancel means where it is). Later stages are never started.
   */
  async cancel(release: ReleaseRecord, by: string): Promise<string> {
    if (!(await this.opts.store.requestCancel(release.id, by)))
      throw new ManentError(Code.FailedPrecondition, `release ${release.id} has already ended (${release.status})`);
    await this.send(release.id, { command: "cancel", by, at: new Date().toISOString() });
    const stage = release.current_stage === null ? undefined : release.stages[release.current_stage - 1];
    const running = (stage?.deploys ?? []).filter((d) => !terminalStatuses.has(d.status as never));
    for (const d of running) {
      await this.opts.engine.cancel(d.deploy_id, by).catch((err: unknown) =>
        this.opts.logger.info("release cancel: its deploy goes on", {
          release: release.id,
          deploy: d.deploy_id,
          reason: ManentError.from(err).message,
        }),
      );
    }
    return running.length
      ? `the release stops once deploy ${running.map((d) => d.deploy_id).join(", ")} has ended (cancelled too); later stages are not started`
      : "the release stops now; later stages are not started";
  }

  /**
   * An approval of the stage the release waits at: refused (403) with the requirement the actor
   * misses, 409 when it approved already (checked here, counted once per principal id by the workflow).
   */
  async approve(release: ReleaseRecord, actor: Actor): Promise<void> {
    const w = this.waitingFor(release, "approval");
    const step = `stage-${w.stage}:approval`;
    checkApprover(
      release,
      { kind: "approval", step, since: w.since, until: w.until, hint: w.hint, approvers: w.approvers },
      release.stages[w.stage - 1]?.approvals ?? [],
      actor,
      "approve",
      "release",
    );
    await this.send(release.id, { command: "approve", stage: w.stage, by: actor.name, by_id: actor.id, at: new Date().toISOString() });
  }

  /** Promotes the release into the manual stage it waits at; `to` must name one of that stage's environments. */
  async promote(release: ReleaseRecord, to: string, actor: Actor): Promise<void> {
    const w = this.waitingFor(release, "promotion", to);
    await this.send(release.id, { command: "promote", stage: w.stage, by: actor.name, by_id: actor.id, at: new Date().toISOString() });
  }

  /** The wait a command is for; `failed_precondition` saying where the release is otherwise. */
  waitingFor(release: ReleaseRecord, kind: "approval" | "promotion", to?: string) {
    if (terminalReleaseStatuses.has(release.status))
      throw new ManentError(Code.FailedPrecondition, `release ${release.id} has already ended (${release.status})`);
    const w = release.waiting;
    const what = kind === "approval" ? "an approval" : `promotion${to ? ` to ${to}` : ""}`;
    if (w?.kind !== kind || (to !== undefined && !w.environments.includes(to))) {
      throw new ManentError(
        Code.FailedPrecondition,
        `release ${release.id} is not waiting for ${what}${w ? ` (${w.hint})` : release.current_stage ? ` (at stage ${release.current_stage})` : ""}`,
      );
    }
    return w;
  }

  private async send(id: string, m: ReleaseCommand): Promise<void> {
    await DBOS.send(id, m, releaseTopic);
    wakeLocalReceiver(id, releaseTopic);
  }
}

function alreadyRetried(release: string, retry: string): ManentError {
  return new ManentError(
    Code.FailedPrecondition,
    `release ${release} was already retried by release ${retry}: a release is retried once (retry ${retry} if it failed)`,
    { details: { release, retried_by: retry } },
  );
}
