import type { Logger, TargetResult } from "../contract/index.js";
import type { DeployStore } from "./deploy-store.js";

/** Most rows in one write: keeps a statement's parameters and its trigger work small. */
const maxBatch = 500;

/**
 * Records the targets of one plugin call as they finish, durably and cheaply: a group commit.
 * The first result is written at once; results that finish while a write is in flight wait for it
 * and go together in the next write (one statement for up to {@link maxBatch} rows). So a slow
 * deploy records each target as it finishes, and 10,000 fast ones cost tens of writes, not 10,000.
 * `settled()` resolves once everything added so far is written: the step awaits it before it
 * completes, so a checkpointed step never has targets that are not recorded.
 */
export class TargetRecorder {
  private queue: TargetResult[] = [];
  private writing: Promise<void> | undefined;

  constructor(
    private readonly store: DeployStore,
    private readonly deployId: string,
    private readonly phase: string,
    private readonly logger: Logger,
  ) {}

  add(result: TargetResult): void {
    this.queue.push(result);
    this.writing ??= this.drain();
  }

  /** Resolves when every result added so far is written (or its write failed and was logged). */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, maxBatch);
        try {
          await this.store.recordTargets(this.deployId, this.phase, batch);
        } catch (e) {
          // Progress is not the deploy's outcome: a target whose record is lost is only deployed again on a resume.
          this.logger.warn("target progress not recorded", {
            deploy: this.deployId,
            phase: this.phase,
            targets: batch.length,
            error: String(e),
          });
        }
      }
    } finally {
      this.writing = undefined;
    }
  }
}
