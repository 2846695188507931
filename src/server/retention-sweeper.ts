import { resolve } from "node:path";
import type pg from "pg";
import type { LoadedConfig } from "../core/config/index.js";
import type { Logger } from "../core/contract/index.js";
import type { Engine } from "../core/engine/engine.js";
import { Code, ManentError } from "../core/errors.js";
import { RetentionSweep, type SweepResult } from "../core/retention/retention-sweep.js";
import { exportAuditRows } from "../storage/audit-export.js";
import { PgRetentionStore } from "../storage/pg-retention.js";
import { IntervalTask } from "./interval-task.js";

/**
 * Runs the retention sweep every `intervalMs` (retention.sweep_interval) on every server; the
 * sweep's lease lets one of them do it. A sweep asked for by hand (POST /api/v1/retention/sweep)
 * joins the one running.
 */
export class RetentionSweeper {
  private readonly every: IntervalTask;
  private running: Promise<SweepResult | undefined> | undefined;

  constructor(
    private readonly sweep: RetentionSweep,
    intervalMs: number,
    private readonly logger: Logger,
  ) {
    this.every = new IntervalTask(intervalMs, () =>
      this.now().then(
        () => undefined,
        (err: unknown) =>
          this.logger.warn("the retention sweep failed; tried again at the next interval", { error: ManentError.from(err).message }),
      ),
    );
  }

  start(): void {
    this.every.start();
  }

  async stop(): Promise<void> {
    await this.every.stop();
    // A sweep asked for by hand may still run.
    await this.running?.catch(() => undefined);
  }

  /** Sweeps now, or joins the sweep running; undefined when another server holds the lease. */
  now(): Promise<SweepResult | undefined> {
    this.running ??= this.sweep.run().finally(() => (this.running = undefined));
    return this.running;
  }
}

/** The history sweep of manent.yml's retention, started; undefined when no policy is configured (everything is kept). */
export async function startHistoryRetention(
  config: LoadedConfig,
  pool: pg.Pool,
  engine: Engine,
  logger: Logger,
): Promise<RetentionSweeper | undefined> {
  const r = config.retention;
  if (!r.deploys && !r.releases && r.rules.length === 0 && !r.audit) return undefined;
  const store = new PgRetentionStore(pool);
  await store.migrate();
  const exportDir = r.audit && resolve(config.baseDir, r.audit.export_dir);
  const sweep = new RetentionSweep({
    config: r,
    store,
    deleteWorkflows: (ids) => engine.deleteEndedWorkflows(ids),
    exportAudit: (rows) =>
      exportAuditRows(exportDir!, rows).catch((err: unknown) => {
        throw new ManentError(
          Code.Unavailable,
          `cannot export the audit log to ${exportDir} (retention.audit.export_dir): ${ManentError.from(err).message}; nothing was deleted`,
          { cause: err },
        );
      }),
    versionsKept: config.uploads.retention.keep_releases,
    holder: config.dbos.executor_id ?? "local",
    logger,
  });
  const sweeper = new RetentionSweeper(sweep, r.sweep_interval, logger);
  sweeper.start();
  return sweeper;
}
