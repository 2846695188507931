import { AsyncLocalStorage } from "node:async_hooks";
import type { ImageRegistry } from "../verification/image-signatures.js";
import { settleOtherVersions } from "./version-upgrade.js";
import type { ArtifactCache } from "../artifacts/artifact-cache.js";
import type { UploadStore } from "../artifacts/upload-store.js";
import type { Network } from "../artifacts/network.js";
import { newDeployId } from "./deploy-id.js";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { getExecutor } from "@dbos-inc/dbos-sdk/internal/dbos";
import type { Logger } from "../contract/index.js";
import type { NewAuditEntry } from "../identity/index.js";
import { connectionShares, type LoadedConfig } from "../config/index.js";
import { Code, ManentError, type ErrorJSON } from "../errors.js";
import { terminalStatuses, type DeployKey, type DeployStatus, type DeployStore, type NewDeploy } from "./deploy-store.js";
import { noMetrics, type EngineMetrics } from "./engine-metrics.js";
import type { PluginRegistry } from "./plugin-registry.js";
import { recordedSettings, resolveSubmission, type ResolvedDeploy, type Submission } from "./resolve.js";
import { cachedArtifact, uploadOf } from "./artifact-fetch.js";
import { faultPause, faultPoint } from "./fault-points.js";
import { checkpointSerializer } from "./checkpoint-serializer.js";
import { CancelWatch } from "./user-cancel.js";
import { rollbackTarget } from "./rollback-target.js";
import { retrySubmission } from "./retry.js";
import { QueueWake } from "./queue-wake.js";
import { DurableWaits } from "./durable-waits.js";
import { WorkSlots } from "./work-slots.js";
import { notificationCoalesceMs, slowDbosIdleLoops } from "./dbos-idle-loops.js";
import { DeployWorkflow, inputRecord, type DeployOutcome, type DeployWorkflowInput } from "./deploy-workflow.js";
import { applicationVersion } from "../../version.js";
import { sendRolloutCommand } from "../rollout/rollout-commands.js";
import { DeployWindows, type WindowOverride, type WindowWait } from "../windows/deploy-windows.js";
import { WindowOverrideWatch, type WindowOverrideStore } from "../windows/window-overrides.js";

export interface EngineOptions {
  config: LoadedConfig;
  store: DeployStore;
  plugins: PluginRegistry;
  logger: Logger;
  metrics?: EngineMetrics;
  /** The Postgres DBOS keeps its checkpoints in (the same database as the deploy records). */
  databaseUrl: string;
  /** Name lookups and HTTP requests to artifact URLs, callbacks, checks and webhooks (src/net/node-network.ts). */
  network: Network;
  /** Clients' uploads, which `upload:` sources name. */
  uploads?: UploadStore;
  /** Container registries, read for image signatures (src/net/oci-registry.ts); absent: an image_signatures policy refuses. */
  imageRegistry?: ImageRegistry;
  /** The artifacts cache's bound (artifacts.cache_size). */
  cache?: ArtifactCache;
  /** The clock deploy windows are read by (default Date.now); a test sets one to be at any date. */
  clock?: () => number;
  /** Where overrides of deploys already waiting for their window are kept (none: such overrides are refused). */
  windowOverrides?: WindowOverrideStore;
  /**
   * Told in this process when a deploy this server ran (or cancelled while queued) ends, after its
   * record says so: the server's drift checks look at its key then. Each server hears of its own
   * deploys only, so a fleet does that look once per deploy, not once per server.
   */
  onDeployEnded?: (deployId: string) => void;
}

export const deployWorkflowName = "manent.deploy";
const deployQueue = "manent-deploys";
const cancelledBefore = new ManentError(Code.Canceled, "cancelled by a user before it started: nothing ran", {
  details: { cancelled_by: "user" },
});

export interface SubmitOptions {
  /**
   * The submission's "ok" entry in the audit log, its deploy id filled in here: written in the
   * statement that records the deploy, so the two commit together. A refusal is the caller's to log.
   */
  audit?: Omit<NewAuditEntry, "deploy_id">;
}

/** The answer to a user's cancel: done at once (`cancelled`), or taken by the running deploy (`requested`), saying what follows. */
export interface CancelAnswer {
  outcome: "cancelled" | "requested";
  message: string;
}
const dryRunQueue = "manent-dry-runs";

/*
 * DBOS keeps its registry in process-wide statics: a workflow function is registered once per
 * process, before launch, and dispatches to the engine started in this process.
 */
let active: DeployWorkflow | undefined;
/**
 * How often DBOS polls each queue: DBOS's default, 1 s. A deploy does not wait for it: a
 * submission, a release's child deploy, a launch and the end of a deploy wake the queue at once
 * (queue-wake.ts). The poll only catches what no wake of this server covers (a deploy another
 * server queued while its own slots were full); at 100 ms the polls of an idle server were most of
 * its commits (two queues, 20 a second).
 */
const queuePollMs = 1000;
const dryRunPollMs = 5000;
/** How often a release's wait for its stage's deploy reads that deploy's workflow status (DBOS's default is 1 s). */
const childDeployPollMs = 200;
const deployWorkflow = DBOS.registerWorkflow(
  async (input: DeployWorkflowInput): Promise<DeployOutcome> => {
    if (!active) throw new ManentError(Code.Unavailable, "the deploy engine is not started in this process");
    return active.run(input);
  },
  { name: deployWorkflowName, maxRecoveryAttempts: 1000 },
);

/**
 * The deploy engine of one server: DBOS launched on Postgres, one workflow per deploy on a queue
 * partitioned by tenant/application/artifact/environment with one running deploy per partition,
 * so two deploys of the same thing never overlap and several servers share the work.
 */
export class Engine {
  private readonly queues: QueueWake;
  /** This build's DBOS application version (version.ts), read once: every workflow it starts carries it. */
  readonly applicationVersion: string = applicationVersion();

  private constructor(
    private readonly opts: EngineOptions & {
      metrics: EngineMetrics;
      cancels: CancelWatch;
      waits: DurableWaits;
      windows: DeployWindows;
      overrides?: { store: WindowOverrideStore; watch: WindowOverrideWatch };
    },
  ) {
    this.queues = new QueueWake(opts.logger);
  }

  /**
   * The engine's own async context. A deploy's end is told in it, not in the workflow's: what the
   * listener starts later (a drift check's heal, a deploy of its own) would otherwise run in the
   * ended workflow's DBOS context and be refused as a child of a workflow no longer running.
   */
  private readonly outsideWorkflows = AsyncLocalStorage.snapshot();

  private deployEnded(id: string): void {
    const listener = this.opts.onDeployEnded;
    if (listener) this.outsideWorkflows(() => listener(id));
  }

  /** The durable waits of this server's workflows, where a release counts its own (see durable-waits.ts). */
  get durableWaits(): DurableWaits {
    return this.opts.waits;
  }

  static async start(opts: EngineOptions): Promise<Engine> {
    if (active) throw new ManentError(Code.FailedPrecondition, "an engine is already running in this process");
    const engine = new Engine({
      ...opts,
      metrics: opts.metrics ?? noMetrics,
      cancels: new CancelWatch(opts.store),
      waits: new DurableWaits(new WorkSlots(opts.config.concurrency, opts.config.tenant_share)),
      windows: new DeployWindows(opts.config.deploy_windows, opts.clock),
      ...(opts.windowOverrides && { overrides: { store: opts.windowOverrides, watch: new WindowOverrideWatch(opts.windowOverrides) } }),
    });
    active = new DeployWorkflow({ ...engine.opts, windowOverrides: engine.opts.overrides, onDeployEnded: (id) => engine.deployEnded(id) });
    DBOS.setConfig({
      name: "manent",
      systemDatabaseUrl: withIdleTransactionTimeout(opts.databaseUrl),
      applicationVersion: engine.applicationVersion,
      executorID: opts.config.dbos.executor_id ?? "local",
      logger: dbosLogger(opts.logger),
      serializer: checkpointSerializer,
      notificationCoalesceMs,
      systemDatabasePoolSize: connectionShares(opts.config.dbos.connections).engine,
    });
    slowDbosIdleLoops();
    try {
      await DBOS.launch();
      const concurrency = opts.config.concurrency;
      // DBOS counts a waiting deploy as running: the work slots (work-slots.ts) bound what runs its
      // steps to concurrency, and the server takes up to max_waiting more that wait.
      const deployLimit = concurrency + opts.config.max_waiting;
      const deploys = await DBOS.registerQueue(deployQueue, {
        partitionConcurrency: 1,
        workerConcurrency: deployLimit,
        minPollingIntervalMs: queuePollMs,
        onConflict: "always_update",
      });
      const dryRuns = await DBOS.registerQueue(dryRunQueue, {
        workerConcurrency: concurrency,
        // A dry run is started by the server that took it (its wake), or at the end of one ahead of
        // it there: the timer only takes one a server could not, so it polls less often.
        minPollingIntervalMs: dryRunPollMs,
        onConflict: "always_update",
      });
      engine.queues.register(deploys, deployLimit);
      engine.queues.register(dryRuns, concurrency);
      engine.queues.wakeOnEnd([deployQueue, dryRunQueue]);
      // Deploys recovered at launch (this server's, cut by a crash) start now, not at the queue's
      // first timer poll (a second after its registration).
      void engine.queues.wake(deployQueue);
      // What an older version left must not stop this one from starting: logged, and tried again at the next start.
      await engine
        .settleOtherVersions([opts.config.dbos.executor_id ?? "local"])
        .catch((err: unknown) =>
          opts.logger.error("cannot settle the deploys of another manent version", { error: ManentError.from(err).message }),
        );
    } catch (err) {
      active = undefined;
      await DBOS.shutdown().catch(() => undefined);
      throw new ManentError(Code.Unavailable, `cannot start the deploy engine on Postgres: ${ManentError.from(err).message}`, {
        cause: err,
      });
    }
    return engine;
  }

  /**
   * Validates a submission and starts its workflow. Bad input throws `invalid_argument` and records
   * nothing; once recorded, a deploy is never lost: if its workflow cannot start it is marked failed.
   */
  async submit(
    submission: Submission,
    submitter?: { name: string; id: string },
    opts: SubmitOptions = {},
  ): Promise<{ id: string; queued_behind?: string; waiting?: WindowWait }> {
    const { config, plugins, store, uploads } = this.opts;
    const id = newDeployId();
    const r = await resolveSubmission(config, plugins, submission, this.opts, id).catch(async (err: unknown) => {
      await uploads?.unclaim(id).catch(() => undefined); // else kept a while (upload-retention.ts)
      throw err;
    });
    // Refused here (nothing recorded) when a deploy window in refuse mode keeps it out; a wait is the workflow's.
    let waiting: WindowWait | undefined;
    try {
      waiting = r.kind === "deploy" ? this.opts.windows.admit(r, submission.window_override) : undefined;
    } catch (err) {
      await uploads?.unclaim(id).catch(() => undefined);
      throw err;
    }
    await faultPause("submit", "resolved");
    if (r.kind === "rollback") {
      // Fixed now, so the record names the version and a later deploy cannot change the target.
      r.to = await rollbackTarget(store, r);
      submission = { ...submission, to: r.to };
    }
    const queueName = r.kind === "dry_run" ? dryRunQueue : deployQueue;
    const key = { tenant: r.tenant, application: r.application, artifact: r.artifact.name, environment: r.environment };
    const record: NewDeploy = {
      id,
      kind: r.kind,
      ...key,
      version: r.kind === "rollback" ? r.to! : r.artifact.version,
      request: { ...submission },
      ...(submitter !== undefined && { submittedBy: submitter.name, submittedById: submitter.id }),
      ...(submission.retry && { retryOf: submission.retry.of }),
      ...(r.envconfigOrigin && { envconfig: r.envconfigOrigin }),
    };
    // The workflow runs what was validated now (see Submission.resolved); the record keeps what was submitted.
    const pinned: Submission = { ...submission, resolved: recordedSettings(r), ...(!this.opts.windows.empty && { windowed: true }) };
    // The workflow is queued first and carries its record, which it writes itself when it starts:
    // a server killed between the two leaves a queued workflow that records itself, never a record
    // without a workflow. Both writes are idempotent.
    const queue = async () => {
      await faultPause("submit", "claimed");
      await DBOS.startWorkflow(deployWorkflow, {
        workflowID: id,
        queueName,
        ...(r.kind !== "dry_run" && { enqueueOptions: { queuePartitionKey: partitionKey(key) } }),
      })({ id, submission: pinned, record: inputRecord(record) });
    };
    const claimed = this.claimedUpload(r, submission);
    try {
      // Queued with its upload claimed and no deletion running: a deletion after this finds the
      // claim, which keeps the upload until the record (written below, or by the workflow) does.
      await (claimed && uploads ? uploads.whileClaimed(r.tenant, claimed, { id, ...key, version: record.version }, queue) : queue());
    } catch (err) {
      if (err instanceof ManentError && err.code === Code.InvalidArgument) {
        // The upload was removed before the claim could be made: nothing was queued.
        await uploads?.unclaim(id).catch(() => undefined);
        throw err;
      }
      throw new ManentError(Code.Unavailable, `deploy ${id} could not be queued: ${ManentError.from(err).message}`, { cause: err });
    }
    faultPoint("submit", "after");
    let ahead: string | undefined;
    const audit = opts.audit && { ...opts.audit, deploy_id: id };
    if (r.kind === "dry_run") await store.createDeploy(record, audit);
    else ahead = (await store.createQueuedDeploy(record, deployQueue, partitionKey(key), audit)).behind;
    // Started now when its partition is free, rather than at the queue's next poll. Woken once the
    // submission is answered, so the answer says where it stands in the queue before it moves.
    void this.queues.wake(queueName);
    return { id, ...(ahead && { queued_behind: ahead }), ...(waiting && { waiting }) };
  }

  /** The upload a submission claimed at its resolve (a retry of bytes this server has cached names none). */
  private claimedUpload(r: ResolvedDeploy, submission: Submission): string | undefined {
    if (r.kind === "rollback") return undefined;
    if (submission.retry && cachedArtifact(r.artifact, { config: this.opts.config, tenant: r.tenant })) return undefined;
    return uploadOf(r.artifact);
  }

  /**
   * Retries a deploy that ended failed, rolled back or cancelled: a new deploy of the same bytes
   * with the same settings, linked to it (see retry.ts). Queued like any submission.
   */
  async retry(
    id: string,
    submitter?: { name: string; id: string },
    opts: SubmitOptions = {},
  ): Promise<{ id: string; queued_behind?: string }> {
    const original = await this.opts.store.getDeploy(id);
    if (!original) throw new ManentError(Code.NotFound, `deploy ${id} not found`);
    return this.submit(retrySubmission(original), submitter, opts);
  }

  /**
   * Starts a deploy from inside another workflow (a release's stage): resolved in a checkpointed
   * step (bad input throws `invalid_argument` there, nothing recorded), then queued like any deploy
   * as a child workflow of the caller, whose replay after a crash finds it started, never twice.
   */
  async startChildDeploy(step: string, submission: Submission, submitter: { name: string; id: string } | undefined): Promise<string> {
    const { config, plugins, store } = this.opts;
    const prepared = await DBOS.runStep(
      async () => {
        const r = await resolveSubmission(config, plugins, submission, this.opts);
        // A stage's deploy in a deploy window's refuse mode fails the stage; in wait mode it waits in its workflow.
        this.opts.windows.admit(r, submission.window_override);
        const id = newDeployId();
        const key = { tenant: r.tenant, application: r.application, artifact: r.artifact.name, environment: r.environment };
        const record: NewDeploy = {
          id,
          kind: "deploy",
          ...key,
          version: r.artifact.version,
          request: { ...submission },
          ...(submitter !== undefined && { submittedBy: submitter.name, submittedById: submitter.id }),
          ...(r.envconfigOrigin && { envconfig: r.envconfigOrigin }),
        };
        return { id, record, partition: partitionKey(key), resolved: recordedSettings(r), windowed: !this.opts.windows.empty };
      },
      { name: `${step}:resolve` },
    );
    const { id, record } = prepared;
    await DBOS.startWorkflow(deployWorkflow, {
      workflowID: id,
      queueName: deployQueue,
      enqueueOptions: { queuePartitionKey: prepared.partition },
    })({
      id,
      submission: { ...submission, resolved: prepared.resolved, ...(prepared.windowed && { windowed: true }) },
      record: inputRecord(record),
    });
    await DBOS.runStep(() => store.createDeploy(record), { name: `${step}:record` });
    void this.queues.wake(deployQueue);
    return id;
  }

  /**
   * Waits (durably: a shutdown does not wait for it) for a deploy started by {@link startChildDeploy}
   * and answers how it ended, as its record says (a deploy cancelled while queued ends without a result).
   */
  async awaitChildDeploy(step: string, id: string): Promise<{ status: DeployStatus; error: ErrorJSON | null }> {
    const handle = DBOS.retrieveWorkflow<DeployOutcome>(id);
    // DBOS looks at the child's status row every second by default: each release stage went on up
    // to a second after its deploy had ended. One indexed read every 200 ms per waiting release.
    await this.opts.waits.during(DBOS.workflowID, () => handle.getResult({ pollingIntervalMs: childDeployPollMs })).catch(() => undefined);
    return DBOS.runStep(
      async () => {
        const d = await this.opts.store.getDeploy(id);
        if (!d) throw new ManentError(Code.Internal, `deploy ${id} has no record`);
        return { status: d.status, error: d.error };
      },
      { name: `${step}:outcome`, retriesAllowed: true, maxAttempts: 20, intervalSeconds: 0.5, backoffRate: 1.5 },
    );
  }

  /**
   * An admin's override of deploy `id`, queued and waiting for its deploy window: it starts at once
   * (the override is recorded, and the wait wakes on this server or, within seconds, on the server
   * of the fleet that runs it). Refused for a deploy that is not waiting.
   */
  async overrideWindow(id: string, override: WindowOverride): Promise<void> {
    const overrides = this.opts.overrides;
    if (!overrides) throw new ManentError(Code.FailedPrecondition, "this server keeps no window overrides");
    const outcome = await overrides.store.record(id, override);
    if (outcome === "not_found") throw new ManentError(Code.NotFound, `deploy ${id} not found`);
    if (outcome === "already") {
      const given = await overrides.store.find(id);
      throw new ManentError(
        Code.FailedPrecondition,
        `deploy ${id}: its deploy window was already overridden${given ? ` by ${given.by} at ${given.at} ("${given.reason}")` : ""}`,
      );
    }
    if (outcome === "not_waiting") {
      throw new ManentError(
        Code.FailedPrecondition,
        `deploy ${id} is not waiting for a deploy window: only a queued deploy that a window or freeze holds back can be overridden`,
      );
    }
    overrides.watch.notify(id);
  }

  /**
   * A user's cancel. What it does depends on where the deploy is (README "What a cancel does"):
   * queued, it is cancelled at once; before its deploy step, it stops there with the targets
   * unchanged; during the deploy step, the targets are rolled back to the checkpoint (or, when the
   * deploy cannot roll back, it stops and ends `failed` naming what was deployed); once the deploy
   * step has finished, the cancel is refused: the new release is live and only a rollback undoes it.
   */
  async cancel(id: string, by?: string): Promise<CancelAnswer> {
    const state = await this.opts.store.requestCancel(id, cancelledBefore.toJSON());
    if (!state) throw new ManentError(Code.NotFound, `deploy ${id} not found`);
    if (!state.accepted) {
      if (terminalStatuses.has(state.previous)) {
        throw new ManentError(Code.FailedPrecondition, `deploy ${id} has already ended (${state.previous})`);
      }
      if (state.kind === "rollback") {
        throw new ManentError(
          Code.FailedPrecondition,
          `rollback ${id} cannot be cancelled: its rollback step has started and stopping it would leave the targets on mixed versions`,
        );
      }
      throw new ManentError(
        Code.FailedPrecondition,
        `deploy ${id} cannot be cancelled: its deploy step has finished and version ${state.version} runs on its targets; to undo it, roll back (manent rollback)`,
      );
    }
    if (state.previous === "queued") {
      // A deploy waiting for its deploy window on this server goes on at once, to end.
      this.opts.cancels.notify(id);
      // Out of the queue too; its record is already `cancelled`, and the workflow, if it was just
      // starting, sees that and runs nothing.
      await DBOS.cancelWorkflow(id).catch((err: unknown) =>
        this.opts.logger.warn("cancel of a queued workflow", { deploy: id, error: String(err) }),
      );
      this.deployEnded(id);
      return { outcome: "cancelled", message: "cancelled before it started: nothing ran" };
    }
    this.opts.cancels.notify(id);
    await this.abortRollout(id, by);
    if (!state.deploying) return { outcome: "requested", message: "the deploy stops before its deploy step: the targets are not changed" };
    return {
      outcome: "requested",
      message: state.no_rollback_reason
        ? `the deploy step is interrupted and not rolled back (${state.no_rollback_reason}): targets already deployed keep version ${state.version}, and the deploy ends failed`
        : "the deploy step is interrupted and the targets are rolled back to the checkpoint: the deploy ends rolled_back",
    };
  }

  /**
   * A rollout waiting at a pause or an approval runs no step that could see a cancel: it is sent
   * an abort as well, so its canary is reverted and its waves rolled back now.
   */
  private async abortRollout(id: string, by: string | undefined): Promise<void> {
    const deploy = await this.opts.store.getDeploy(id);
    if (!deploy?.rollout || deploy.status !== "running") return;
    await sendRolloutCommand(this.opts.store, deploy, "abort", { by: by ?? null, cancel: true }).catch((err: unknown) =>
      this.opts.logger.warn("cancel: the rollout was not sent an abort", { deploy: id, error: ManentError.from(err).message }),
    );
  }

  /**
   * Runs the pending workflows of another executor (a dead server of the fleet) through DBOS's
   * recovery: they are re-queued for any live server, each resuming after its last checkpoint.
   */
  async recoverExecutor(executorId: string): Promise<number> {
    await this.settleOtherVersions([executorId]);
    const recovered = (await getExecutor().recoverPendingWorkflows([executorId])).length;
    if (recovered > 0) void this.queues.wake(deployQueue);
    return recovered;
  }

  /** Started deploys of another manent version on `executorIds` end honestly (see version-upgrade.ts). */
  private async settleOtherVersions(executorIds: string[]): Promise<void> {
    await settleOtherVersions({
      version: this.applicationVersion,
      workflowName: deployWorkflowName,
      executorIds,
      store: this.opts.store,
      logger: this.opts.logger,
    });
  }

  /**
   * Deletes the DBOS rows (status, input, output, checkpoints) of ended workflows: what the
   * retention sweep lets go. A workflow still queued or running is left, whatever is asked.
   */
  async deleteEndedWorkflows(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const ended = (await DBOS.listWorkflows({ workflowIDs: ids, loadInput: false, loadOutput: false })).filter(
      (w) => w.status !== "PENDING" && w.status !== "ENQUEUED",
    );
    if (ended.length > 0) await DBOS.deleteWorkflows(ended.map((w) => w.workflowID));
  }

  /** Waits for the running workflows of this server (up to the timeout), then stops DBOS. */
  async shutdown(timeoutMs: number): Promise<void> {
    const executor = getExecutor();
    // No deploy starts here any more; the ones running their steps finish them (up to the
    // timeout); the ones waiting durably (a pause, an approval, an analysis interval) are not
    // waited for: their deadlines are recorded, and another server or the next start resumes them.
    await executor.deactivateEventReceivers();
    const { waiting, busy } = await this.opts.waits.settle(
      () => new Map([...executor.systemDatabase.runningWorkflowMap].map(([id, runs]) => [id, runs.map((r) => r.promise)])),
      timeoutMs,
    );
    if (waiting.length > 0) {
      this.opts.logger.info("shutting down: not waiting for the deploys that wait on a pause, an approval or an analysis interval", {
        deploys: waiting,
      });
    }
    if (busy.length > 0)
      this.opts.logger.warn("shutting down: deploys still running their steps after shutdown_timeout", { deploys: busy });
    await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    active = undefined;
  }
}

/**
 * The system database's URL with DBOS's default `idle_in_transaction_session_timeout` (60 s) set
 * at connection time. Given no such setting, DBOS sends a `SET` from the pool's `connect` event,
 * where it races the query the connection was taken for (pg warns that one client runs two
 * queries at once, an error in pg 9). A setting the URL already has is kept.
 */
export function withIdleTransactionTimeout(databaseUrl: string): string {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return databaseUrl; // not a URL pg would read either: DBOS reports it
  }
  const options = url.searchParams.get("options") ?? "";
  if (options.includes("idle_in_transaction_session_timeout")) return databaseUrl;
  url.searchParams.set("options", `${options} -c idle_in_transaction_session_timeout=60000`.trim());
  return url.toString();
}

const partitionKey = (k: DeployKey): string => `${k.tenant}/${k.application}/${k.artifact}/${k.environment}`;

function dbosLogger(logger: Logger) {
  const text = (entry: unknown): string =>
    entry instanceof Error ? entry.message : typeof entry === "string" ? entry : JSON.stringify(entry);
  return {
    info: (e: unknown) => logger.debug(text(e), { component: "dbos" }),
    debug: (e: unknown) => logger.debug(text(e), { component: "dbos" }),
    warn: (e: unknown) => logger.warn(text(e), { component: "dbos" }),
    error: (e: unknown) => logger.error(text(e), { component: "dbos" }),
  };
}
