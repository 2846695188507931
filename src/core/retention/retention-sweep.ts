import type { RetentionConfig } from "../config/retention-config.js";
import type { Logger } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import { deployPolicy, releasePolicy } from "./retention-policy.js";
import type { AuditRow, RetentionStore } from "./retention-store.js";

/** Rows looked at and deleted per statement: a sweep of a large backlog is many short statements. */
const batch = 500;
const leaseName = "retention-sweep";

export interface RetentionSweepDeps {
  config: RetentionConfig;
  store: RetentionStore;
  /** Deletes the DBOS rows (status, inputs, outputs, checkpoints) of ended workflows, by id. */
  deleteWorkflows(ids: string[]): Promise<void>;
  /** Writes audit entries somewhere lasting and resolves once they are there (written and synced); returns where. */
  exportAudit(rows: AuditRow[]): Promise<string>;
  /** How many of the newest versions of each application/artifact/environment keep a deploy (at least 2: current and a rollback's). */
  versionsKept: number;
  /** This server (its executor id): the holder of the sweep's lease. */
  holder: string;
  logger: Logger;
}

export interface SweepResult {
  deploys: number;
  releases: number;
  audit_entries: number;
  audit_files: string[];
}

/**
 * Deletes the history a retention policy lets go: ended releases first (their stage deploys may
 * go then), then ended deploys, each with its events and its DBOS workflow's rows (DBOS's first,
 * so a sweep cut in between finds the records again), then the audit entries past their time,
 * written out before they are deleted. One server of a fleet sweeps at a time (a lease in the
 * database, renewed while it sweeps); what is still needed is never a candidate (pg-retention.ts).
 */
export class RetentionSweep {
  constructor(private readonly deps: RetentionSweepDeps) {}

  /** Sweeps once; undefined when another server holds the lease. */
  async run(): Promise<SweepResult | undefined> {
    const { config, store, holder } = this.deps;
    const ttl = Math.max(config.sweep_interval, 600_000);
    if (!(await store.takeLease(leaseName, holder, ttl))) return undefined;
    const renew = async () => {
      if (!(await store.takeLease(leaseName, holder, ttl)))
        throw new ManentError(Code.Aborted, "the retention sweep's lease was taken by another server");
    };
    const result: SweepResult = { deploys: 0, releases: 0, audit_entries: 0, audit_files: [] };
    for (const key of await store.releaseKeys()) {
      const keep = releasePolicy(config, key);
      if (!keep) continue;
      for (;;) {
        const ids = await store.releaseCandidates(key, keep, batch);
        if (ids.length === 0) break;
        await this.deps.deleteWorkflows(ids);
        await store.deleteReleases(ids);
        result.releases += ids.length;
        await renew();
        if (ids.length < batch) break;
      }
    }
    for (const key of await store.deployKeys()) {
      const keep = deployPolicy(config, key);
      if (!keep) continue;
      for (;;) {
        const ids = await store.deployCandidates(key, keep, Math.max(2, this.deps.versionsKept), batch);
        if (ids.length === 0) break;
        await this.deps.deleteWorkflows(ids);
        await store.deleteDeploys(ids);
        result.deploys += ids.length;
        await renew();
        if (ids.length < batch) break;
      }
    }
    if (config.audit) {
      for (;;) {
        const rows = await store.auditBefore(config.audit.keep_for, batch * 10);
        if (rows.length === 0) break;
        // Written and synced before anything is deleted: a failed export deletes nothing.
        result.audit_files.push(await this.deps.exportAudit(rows));
        result.audit_entries += await store.deleteAudit(rows.map((r) => r.id));
        await renew();
        if (rows.length < batch * 10) break;
      }
    }
    if (result.deploys + result.releases + result.audit_entries > 0)
      this.deps.logger.info("retention sweep deleted history", { ...result });
    return result;
  }
}
