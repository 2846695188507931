import { DBOS } from "@dbos-inc/dbos-sdk";
import { faultPoint } from "../engine/fault-points.js";
import { judge, measure, type AnalysisCheck, type Measurement } from "./analysis/index.js";
import type { BackgroundTicker } from "./command-inbox.js";
import { runLoadTest } from "./load-test-hook.js";
import type { BackgroundAnalysisSettings } from "./rollout-config.js";
import type { RolloutHost } from "./rollout-host.js";
import type { RolloutRecorder } from "./rollout-recorder.js";
import type { BackgroundState } from "./rollout-state.js";

/**
 * `rollout.background_analysis` (Argo Rollouts' background analysis): checks measured at their own
 * interval while the rollout runs (during every wait, through the {@link CommandInbox}, and between
 * steps), whose failure (beyond `failure_limit` or `inconclusive_limit`) aborts the rollout at once.
 * A check never "succeeds" here: it is measured until the analysis stops.
 *
 * Counts are cumulative from the (re)start, not consecutive. Each round of measurements is a
 * checkpointed step whose output (the measurements and their time) rebuilds the counts and the next
 * due times when a killed server's workflow resumes: the counts are kept across a restart, and a
 * measurement due while the server was down is taken as soon as it resumes.
 */
export class BackgroundAnalysis implements BackgroundTicker {
  private readonly checks: Map<string, AnalysisCheck>;
  private taken = new Map<string, Measurement[]>();
  private next = new Map<string, number>();
  private active = false;
  private round = 0;
  private starts = 0;
  readonly state: BackgroundState;

  constructor(
    private readonly host: RolloutHost,
    private readonly rec: RolloutRecorder,
    readonly settings: BackgroundAnalysisSettings,
    private readonly previousVersion: string | undefined,
  ) {
    this.checks = new Map(settings.checks.map((n) => [n, host.r.analysis!.checks[n]!]));
    this.state = {
      status: "pending",
      since: null,
      starting_step: settings.waves && host.r.rollout?.canary === undefined ? null : settings.starting_step,
      checks: settings.checks.map((check) => ({ check, measured: 0, failed: 0, inconclusive: 0, last: null })),
      message: null,
    };
    rec.state.background = this.state;
  }

  get running(): boolean {
    return this.active;
  }

  /**
   * Starts measuring (a no-op while running): counts start from zero, the load-test hook is called,
   * every check is due at once. `where` names the point of the rollout, for the hook's failure.
   */
  async start(where: string): Promise<void> {
    if (this.active) return;
    this.starts += 1;
    const prefix = `background-${this.starts}`;
    const since = await DBOS.now();
    await runLoadTest(this.host, this.rec, `${prefix}:load_test`, `background analysis at ${where}`, this.previousVersion);
    this.taken = new Map(this.settings.checks.map((n) => [n, []]));
    this.next = new Map(this.settings.checks.map((n) => [n, since]));
    this.active = true;
    Object.assign(this.state, { status: "running", since: new Date(since).toISOString(), message: null });
    for (const c of this.state.checks) Object.assign(c, { measured: 0, failed: 0, inconclusive: 0, last: null });
    await this.rec.save();
  }

  /** Stops measuring: the canary was promoted, or the rollout ends. */
  async stop(): Promise<void> {
    if (!this.active) return;
    this.active = false;
    this.state.status = "stopped";
    await this.rec.save();
  }

  due(): number | null {
    return this.active ? Math.min(...this.next.values()) : null;
  }

  async tick(now: number): Promise<string | undefined> {
    if (!this.active) return undefined;
    const due = this.settings.checks.filter((n) => this.next.get(n)! <= now);
    if (due.length === 0) return undefined;
    this.round += 1;
    const name = `background:${this.round}`;
    const vars = {
      MANENT_VERSION: this.host.r.artifact.version,
      MANENT_APPLICATION: this.host.r.application,
      MANENT_ENVIRONMENT: this.host.r.environment,
      MANENT_TENANT: this.host.r.tenant,
      MANENT_WEIGHT: String(this.rec.state.canary?.weight ?? 0),
      ...(this.previousVersion && { MANENT_PREVIOUS_VERSION: this.previousVersion }),
    };
    // Not a recorded deploy step (a long canary would list hundreds): the measurements are on the rollout.
    const out = await DBOS.runStep(
      async () => {
        // Each measurement has its own timeout; nothing else cancels it.
        const signal = new AbortController().signal;
        const measurements = await Promise.all(due.map((n) => measure(n, this.checks.get(n)!, vars, signal, this.host.outbound)));
        return { measurements, at: Date.now() };
      },
      { name },
    );
    let failed: string | undefined;
    for (const m of out.measurements) {
      const check = this.checks.get(m.check)!;
      this.taken.get(m.check)!.push(m);
      this.next.set(m.check, out.at + check.interval);
      this.rec.state.measurements.push({ step: "background", ...m });
      this.host.metrics.analysisMeasured(this.rec.labels(), m);
      const s = this.state.checks.find((c) => c.check === m.check)!;
      s.measured += 1;
      if (m.verdict === "failed") s.failed += 1;
      if (m.verdict === "inconclusive") s.inconclusive += 1;
      s.last = { at: m.at, value: m.value, verdict: m.verdict, message: m.message };
      const j = judge(check, this.taken.get(m.check)!);
      if (j.state === "failed") failed ??= j.reason ?? `check ${m.check} failed`;
    }
    if (failed !== undefined) {
      this.active = false;
      Object.assign(this.state, { status: "failed", message: failed });
    }
    await this.rec.save();
    faultPoint(name, "checkpointed");
    return failed;
  }
}
