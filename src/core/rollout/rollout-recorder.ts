import type { DeployStore } from "../engine/deploy-store.js";
import type { DeployLabels, EngineMetrics } from "../engine/engine-metrics.js";
import type { ResolvedDeploy } from "../engine/resolve.js";
import type { RolloutState } from "./rollout-state.js";

/**
 * Holds a rollout's state in the workflow and writes it to the deploy record at each transition.
 * The state is rebuilt from checkpointed step outputs when a workflow resumes. Each write is a plain
 * replace numbered by its place in the workflow: the replay's writes carry the numbers they had the
 * first time, and the store keeps the state that was reached rather than flapping back through the
 * earlier ones (which refused a command sent during the resume as "not paused").
 */
export class RolloutRecorder {
  readonly state: RolloutState = {
    waves: [],
    current_wave: null,
    canary: null,
    waiting: null,
    measurements: [],
    approvals: [],
    message: null,
  };

  constructor(
    private readonly store: DeployStore,
    private readonly metrics: EngineMetrics,
    private readonly id: string,
    private readonly r: ResolvedDeploy,
  ) {}

  private revision = 0;

  async save(): Promise<void> {
    this.revision += 1;
    await this.store.saveRollout(this.id, this.state, this.revision);
  }

  /** Records the candidate's weight on the state and in the metrics. */
  weight(weight: number): void {
    if (this.state.canary) this.state.canary.weight = weight;
    this.metrics.canaryWeight(this.labels(), weight);
  }

  /** The deploy's key, as the rollout metrics label it. */
  labels(): DeployLabels {
    return { tenant: this.r.tenant, application: this.r.application, environment: this.r.environment };
  }
}
