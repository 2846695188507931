import type { Logger } from "../core/contract/index.js";
import { formatBytes } from "../core/config/format-bytes.js";
import { ManentError } from "../core/errors.js";
import type { UploadRetention } from "../storage/upload-retention.js";
import { IntervalTask } from "./interval-task.js";

/**
 * Sweeps the uploads no deploy needs every `intervalMs` (uploads.retention.sweep_interval). Every
 * server of a fleet sweeps; two sweeps at once take each tenant's lock in turn and remove each
 * upload once.
 */
export class UploadSweeper {
  private readonly every: IntervalTask;

  constructor(
    private readonly retention: UploadRetention,
    intervalMs: number,
    private readonly logger: Logger,
  ) {
    this.every = new IntervalTask(intervalMs, () => this.sweepOnce());
  }

  start(): void {
    this.every.start();
  }

  stop(): Promise<void> {
    return this.every.stop();
  }

  private async sweepOnce(): Promise<void> {
    try {
      const removed = await this.retention.sweep();
      if (removed.length) {
        const bytes = removed.reduce((sum, r) => sum + r.size, 0);
        this.logger.info("removed uploads no deploy needs any more", { uploads: removed.length, size: formatBytes(bytes) });
      }
    } catch (err) {
      this.logger.warn("the sweep of uploads failed; tried again at the next interval", { error: ManentError.from(err).message });
    }
  }
}
