/**
 * Runs `task` every `intervalMs` (0: never), each run `intervalMs` after the previous one ended,
 * until stopped; a pending run never keeps the process alive. What the periodic sweeps share.
 */
export class IntervalTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly intervalMs: number,
    private readonly task: () => Promise<void>,
  ) {}

  start(): void {
    if (this.intervalMs > 0) this.schedule();
  }

  /** No run starts any more; resolves once the one running has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.task().finally(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref();
  }
}
