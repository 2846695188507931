import type { Logger } from "../core/contract/index.js";
import { formatBytes } from "../core/config/format-bytes.js";
import { ManentError } from "../core/errors.js";
import type { UploadRetention } from "../storage/upload-retention.js";

/**
 * Sweeps the uploads no deploy needs every `intervalMs` (uploads.retention.sweep_interval). Every
 * server of a fleet sweeps; two sweeps at once take each tenant's lock in turn and remove each
 * upload once.
 */
export class UploadSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly retention: UploadRetention,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.intervalMs > 0) this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweepOnce().finally(() => this.schedule());
    }, this.intervalMs);
    // A pending sweep never keeps the process alive.
    this.timer.unref();
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
