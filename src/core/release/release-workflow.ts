import { DBOS } from "@dbos-inc/dbos-sdk";
import { ArtifactPolicy } from "../artifacts/artifact-policy.js";
import type { Network } from "../artifacts/network.js";
import type { UploadStore } from "../artifacts/upload-store.js";
import { parseArtifactSource } from "../artifacts/artifact-source.js";
import { findEnvconfig, type LoadedConfig } from "../config/index.js";
import type { Logger } from "../contract/index.js";
import { fetchArtifact } from "../engine/artifact-fetch.js";
import type { Engine } from "../engine/engine.js";
import { faultPoint } from "../engine/fault-points.js";
import { stoppedHere } from "../engine/step-runner.js";
import { Code, ManentError, type ErrorJSON } from "../errors.js";
import { judge, measure, type AnalysisCheck, type Measurement } from "../rollout/analysis/index.js";
import { approvalsAt, awaitedText, requirementOf } from "../rollout/approvals.js";
import { formatMs } from "../rollout/rollout-config.js";
import type { ReleaseCommand } from "./release-inbox.js";
import { ReleaseInbox } from "./release-inbox.js";
import type { NewRelease, ReleaseProgress, ReleaseStatus, ReleaseStore, StageState } from "./release-store.js";
import type { Stage } from "./pipeline.js";

export interface ReleaseWorkflowInput {
  release: NewRelease;
}

export interface ReleaseOutcome {
  status: ReleaseStatus;
  error?: ErrorJSON;
}

export interface ReleaseDeps {
  engine: Engine;
  store: ReleaseStore;
  config: LoadedConfig;
  logger: Logger;
  network: Network;
  uploads?: UploadStore;
}

/** Ends a release early: a failed stage, a cancel, a timed-out approval. */
class ReleaseStopped extends ManentError {
  constructor(
    code: Code,
    message: string,
    readonly status: "failed" | "cancelled",
  ) {
    super(code, message, status === "cancelled" ? { details: { cancelled_by: "user" } } : {});
  }
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * One release as a durable workflow: the artifact pinned by sha256 once, then each stage of the
 * pipeline in turn (manual promotion, approval, the deploys as child workflows of the deploy engine,
 * soak, analysis). Every wait has its deadline in a checkpointed step and reads commands through
 * DBOS.recv, so a server killed anywhere resumes with the same deadlines, approvals and commands.
 * The progress on the release record is rewritten at each transition (a plain replace, safe to repeat).
 */
export class ReleaseWorkflow {
  constructor(private readonly deps: ReleaseDeps) {}

  async run({ release }: ReleaseWorkflowInput): Promise<ReleaseOutcome> {
    const { store, logger } = this.deps;
    const id = release.id;
    await DBOS.runStep(() => store.createRelease(release), { name: "record" });
    const inbox = new ReleaseInbox(this.deps.engine.durableWaits);
    const p: ReleaseProgress = {
      status: "running",
      current_stage: null,
      // A retry's stages the retried release passed are done already: carried over, never run again.
      stages: release.pipeline.stages.map((s, i) => release.retry?.done[i] ?? newStage(i + 1, s)),
      waiting: null,
      error: null,
      sha256: release.artifact.sha256 ?? null,
    };
    // Numbered as the deploy's rollout state is (rollout-recorder.ts): a replay does not flap the progress back.
    let revision = 0;
    const save = () => store.saveProgress(id, p, ++revision);
    await save();
    try {
      p.sha256 ??= await this.pin(release);
      await save();
      for (const [i, stage] of release.pipeline.stages.entries()) {
        const state = p.stages[i]!;
        if (state.done_by) continue;
        p.current_stage = i + 1;
        await this.runStage(release, p, state, stage, inbox, save);
      }
      p.status = "succeeded";
    } catch (err) {
      // DBOS stopped in this process while the release waited (a shutdown): its run here stops,
      // recording nothing, and it is resumed elsewhere (step-runner.ts, stoppedHere).
      if (stoppedHere()) {
        logger.info("release left to the next start: the server stopped while it waited", { release: id });
        throw err;
      }
      const e = ManentError.from(err);
      p.status = err instanceof ReleaseStopped ? err.status : "failed";
      p.error = e.toJSON();
      p.waiting = null;
      const at = p.current_stage === null ? undefined : p.stages[p.current_stage - 1];
      if (at && !["succeeded", "failed"].includes(at.status)) {
        at.status = p.status === "cancelled" ? "cancelled" : "failed";
        at.message = e.message;
        at.finished_at = iso(await DBOS.now());
      }
      for (const s of p.stages) if (s.status === "pending") s.status = "not_started";
    }
    await save();
    logger.info("release finished", { release: id, status: p.status, ...(p.error && { error: p.error.message }) });
    return p.error ? { status: p.status, error: p.error } : { status: p.status };
  }

  /** The sha256 every stage deploys: known from an upload's name, else read once from the source into the cache. */
  private async pin(release: NewRelease): Promise<string> {
    const source = parseArtifactSource(release.artifact.source);
    if (source.kind === "upload") return source.sha256;
    return DBOS.runStep(
      async () => {
        const ctx = {
          config: this.deps.config,
          tenant: release.tenant,
          network: this.deps.network,
          ...(this.deps.uploads && { uploads: this.deps.uploads }),
        };
        const fetched = await fetchArtifact(release.artifact, ctx, AbortSignal.timeout(10 * 60_000));
        return fetched.sha256!;
      },
      { name: "pin", retriesAllowed: true, maxAttempts: 3, intervalSeconds: 1, backoffRate: 2 },
    );
  }

  private async runStage(
    release: NewRelease,
    p: ReleaseProgress,
    state: StageState,
    stage: Stage,
    inbox: ReleaseInbox,
    save: () => Promise<void>,
  ): Promise<void> {
    const n = state.index;
    const where = `stage ${n} (${stage.environments.join(", ")})`;
    const cancelledAt = (m: ReleaseCommand, what: string) =>
      new ReleaseStopped(Code.Canceled, `cancelled${m.by ? ` by ${m.by}` : ""} ${what} ${where}`, "cancelled");
    await inbox.poll();
    if (inbox.cancelled) throw cancelledAt(inbox.cancelled, "before");
    state.started_at = iso(await DBOS.now());

    if (stage.promotion === "manual") {
      state.status = "waiting";
      const since = await DBOS.now();
      p.waiting = {
        kind: "promotion",
        stage: n,
        environments: stage.environments,
        since: iso(since),
        until: null,
        hint: `waiting for promotion: manent release promote ${release.id} --to ${stage.environments[0]}`,
        approvers: null,
      };
      await save();
      faultPoint(`stage-${n}:promotion`, "after");
      const out = await inbox.wait(null, n, "promote");
      if (out.ended === "command" && out.message.command === "cancel") throw cancelledAt(out.message, "while waiting for promotion to");
      if (out.ended === "command") {
        state.promoted_by = out.message.by;
        state.promoted_at = out.message.at;
      }
      p.waiting = null;
    }

    if (stage.approval) await this.approval(release, p, state, stage, inbox, save, cancelledAt);

    state.status = "deploying";
    await save();
    const submitter = release.submitted_by_id
      ? { name: release.submitted_by ?? release.submitted_by_id, id: release.submitted_by_id }
      : undefined;
    // Started one after the other (each a checkpointed step), then awaited together: the order of
    // DBOS operations stays the same on a replay.
    for (const environment of stage.environments) {
      const deployId = await this.deps.engine
        .startChildDeploy(`stage-${n}:${environment}`, this.submission(release, p.sha256!, environment, n), submitter)
        .catch((err: unknown) => {
          throw new ReleaseStopped(ManentError.from(err).code, `${where}: ${environment}: ${ManentError.from(err).message}`, "failed");
        });
      state.deploys.push({ environment, deploy_id: deployId, status: "queued" });
      await save();
    }
    faultPoint(`stage-${n}:deploy`, "after");
    const outcomes = await Promise.all(
      state.deploys.map((d) => this.deps.engine.awaitChildDeploy(`stage-${n}:${d.environment}`, d.deploy_id)),
    );
    outcomes.forEach((o, j) => (state.deploys[j]!.status = o.status));
    await save();
    await inbox.poll();
    const failed = state.deploys.map((d, j) => ({ d, o: outcomes[j]! })).filter(({ o }) => o.status !== "succeeded");
    if (failed.length > 0) {
      const { d, o } = failed[0]!;
      const why = o.error?.message ?? o.status;
      if (inbox.cancelled) throw cancelledAt(inbox.cancelled, `while deploy ${d.deploy_id} ran in`);
      throw new ReleaseStopped(Code.Aborted, `${where}: deploy ${d.deploy_id} to ${d.environment} ended ${o.status}: ${why}`, "failed");
    }
    if (inbox.cancelled) throw cancelledAt(inbox.cancelled, "after the deploys of");

    if (stage.soak !== undefined && stage.soak > 0) {
      const since = await DBOS.runStep(async () => Date.now(), { name: `stage-${n}:soak` });
      const until = since + stage.soak;
      state.status = "soaking";
      state.soak_since = iso(since);
      state.soak_until = iso(until);
      p.waiting = {
        kind: "soak",
        stage: n,
        environments: stage.environments,
        since: iso(since),
        until: iso(until),
        hint: `soaking ${formatMs(stage.soak)} in ${stage.environments.join(", ")} until ${iso(until)}`,
        approvers: null,
      };
      await save();
      faultPoint(`stage-${n}:soak`, "after");
      const out = await inbox.wait(until, n, undefined);
      if (out.ended === "command") throw cancelledAt(out.message, "during the soak of");
      p.waiting = null;
    }

    if (stage.analysis) {
      state.status = "analysing";
      p.waiting = {
        kind: "analysis",
        stage: n,
        environments: stage.environments,
        since: iso(await DBOS.now()),
        until: null,
        hint: `analysis ${stage.analysis.checks.join(", ")} in ${stage.environments.join(", ")}`,
        approvers: null,
      };
      await save();
      for (const environment of stage.environments) {
        await this.analysis(release, state, stage.analysis.checks, environment, inbox, save, () =>
          cancelledAt(inbox.cancelled!, "during the analysis of"),
        );
      }
      p.waiting = null;
    }

    state.status = "succeeded";
    state.finished_at = iso(await DBOS.now());
    await save();
  }

  /** Waits for the stage's approvals: `count` distinct approvers allowed by its requirement (checked by the server when sent). */
  private async approval(
    release: NewRelease,
    p: ReleaseProgress,
    state: StageState,
    stage: Stage,
    inbox: ReleaseInbox,
    save: () => Promise<void>,
    cancelledAt: (m: ReleaseCommand, what: string) => ReleaseStopped,
  ): Promise<void> {
    const n = state.index;
    const step = `stage-${n}:approval`;
    const since = await DBOS.runStep(async () => Date.now(), { name: step });
    const timeout = stage.approval!.timeout;
    const until = timeout === undefined ? null : since + timeout;
    const requirement = { ...requirementOf(stage.approval!.approvers), explicit: true };
    const hint = () => {
      const notes = [awaitedText(requirement, approvalsAt(state.approvals, step)), until !== null && `fails at ${iso(until)}`].filter(
        Boolean,
      );
      return `waiting for approval: manent release approve ${release.id} (${notes.join("; ")})`;
    };
    state.status = "waiting";
    p.waiting = {
      kind: "approval",
      stage: n,
      environments: stage.environments,
      since: iso(since),
      until: until === null ? null : iso(until),
      hint: hint(),
      approvers: requirement,
    };
    await save();
    for (;;) {
      const out = await inbox.wait(until, n, "approve");
      if (out.ended === "timeout") {
        const got = approvalsAt(state.approvals, step).length;
        throw new ReleaseStopped(
          Code.DeadlineExceeded,
          `stage ${n} (${stage.environments.join(", ")}): ${got} of ${requirement.count} approvals within ${formatMs(timeout!)}`,
          "failed",
        );
      }
      const m = out.message;
      if (m.command === "cancel") throw cancelledAt(m, "while waiting for approval of");
      const byId = m.by_id ?? "anonymous";
      if (!state.approvals.some((a) => a.by_id === byId)) {
        state.approvals.push({ step, by: m.by ?? byId, by_id: byId, at: m.at, command: "approve" });
      }
      if (approvalsAt(state.approvals, step).length >= requirement.count) break;
      p.waiting.hint = hint();
      await save();
      faultPoint(step, "approved");
    }
    p.waiting = null;
  }

  /**
   * The stage's analysis in one environment: the named checks of its envconfig, each measured every
   * `interval` until judged; each round a checkpointed step and each wait a durable one, as a rollout's.
   */
  private async analysis(
    release: NewRelease,
    state: StageState,
    names: string[],
    environment: string,
    inbox: ReleaseInbox,
    save: () => Promise<void>,
    cancelled: () => ReleaseStopped,
  ): Promise<void> {
    const n = state.index;
    const name = `stage-${n}:analysis:${environment}`;
    const key = { tenant: release.tenant, application: release.application, artifact: release.artifact.name, environment };
    const section = await DBOS.runStep(async () => (await findEnvconfig(this.deps.config, key)).envconfig.analysis ?? null, {
      name: `${name}:checks`,
    });
    const checks = new Map<string, AnalysisCheck>();
    for (const c of names) {
      const check = section?.checks[c];
      if (!check) {
        throw new ReleaseStopped(
          Code.InvalidArgument,
          `stage ${n}: analysis.checks: no check named "${c}" in the envconfig of ${environment}`,
          "failed",
        );
      }
      checks.set(c, check);
    }
    const vars: Record<string, string> = {
      MANENT_VERSION: release.artifact.version,
      MANENT_APPLICATION: release.application,
      MANENT_ENVIRONMENT: environment,
      MANENT_TENANT: release.tenant,
      MANENT_WEIGHT: "100",
    };
    const outbound = new ArtifactPolicy({ ...this.deps.config, lookup: this.deps.network.lookup }).outbound(this.deps.network);
    const taken = new Map<string, Measurement[]>(names.map((c) => [c, []]));
    const next = new Map<string, number>(names.map((c) => [c, 0]));
    const running = new Set(names);
    let now = 0;
    for (let round = 1; ; round++) {
      const due = [...running].filter((c) => next.get(c)! <= now);
      const out = await DBOS.runStep(
        async () => ({
          measurements: await Promise.all(due.map((c) => measure(c, checks.get(c)!, vars, AbortSignal.timeout(300_000), outbound))),
          at: Date.now(),
        }),
        { name: `${name}:${round}` },
      );
      for (const m of out.measurements) {
        taken.get(m.check)!.push(m);
        next.set(m.check, out.at + checks.get(m.check)!.interval);
        state.measurements.push({ step: name, ...m });
      }
      await save();
      for (const c of due) {
        const j = judge(checks.get(c)!, taken.get(c)!);
        if (j.state === "failed") {
          throw new ReleaseStopped(
            Code.Aborted,
            `stage ${n} (${environment}): analysis failed: ${j.reason ?? `check ${c} failed`}`,
            "failed",
          );
        }
        if (j.state === "successful") running.delete(c);
      }
      if (running.size === 0) return;
      const until = Math.min(...[...running].map((c) => next.get(c)!));
      const outcome = await inbox.wait(until, n, undefined);
      if (outcome.ended === "command") throw cancelled();
      // Which checks are due is decided from the recorded deadline, never the clock, so a replay takes the same path.
      now = until;
    }
  }

  private submission(release: NewRelease, sha256: string, environment: string, stage: number) {
    return {
      kind: "deploy" as const,
      descriptor: {
        apiVersion: "manent/v1",
        tenant: release.tenant,
        application: release.application,
        environment,
        artifact: { ...release.artifact, sha256 },
      },
      descriptorFile: `${release.descriptor_file} (release ${release.id}, stage ${stage})`,
      release: { id: release.id, stage },
    };
  }
}

function newStage(index: number, s: Stage): StageState {
  return {
    index,
    environments: s.environments,
    status: "pending",
    deploys: [],
    promoted_by: null,
    promoted_at: null,
    approvals: [],
    soak_since: null,
    soak_until: null,
    measurements: [],
    started_at: null,
    finished_at: null,
    message: null,
  };
}
