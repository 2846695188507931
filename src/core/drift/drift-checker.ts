import type { Network } from "../artifacts/network.js";
import {
  DriftStatus,
  isDriftInspector,
  targetId,
  type DriftChange,
  type Logger,
  type Request,
  type TargetDrift,
} from "../contract/index.js";
import { deploySecretRefSchema, findEnvconfig, type DeploySecretRef, type LoadedConfig } from "../config/index.js";
import { Code, ManentError } from "../errors.js";
import { openCallSecrets } from "../engine/call-secrets.js";
import { sendCallback, type CallbackPayload } from "../engine/callbacks.js";
import type { DeployKey } from "../engine/deploy-store.js";
import type { PluginRegistry } from "../engine/plugin-registry.js";
import { recordedSettings, resolveSubmission, type RecordedSettings, type ResolvedDeploy, type Submission } from "../engine/resolve.js";
import { compareEnvconfig, type EnvconfigComparison } from "./envconfig-change.js";
import type { DriftReport, DriftStore, RecordedRelease, TargetDriftRecord } from "./drift-record.js";
import { releaseAgain } from "./release-again.js";

/** How long one drift call may take when the envconfig sets no deploy step timeout. */
const defaultCheckTimeoutMs = 5 * 60_000;
/** Who a heal's deploy names as its submitter. */
export const healSubmitter = { name: "manent drift heal", id: "system:drift-heal" };

export interface DriftCheckerOptions {
  config: LoadedConfig;
  plugins: PluginRegistry;
  store: DriftStore;
  logger: Logger;
  /** Name lookups and the `drifted` callbacks' requests. */
  network: Network;
  /** What a deploy resolved (its record's resolve step), for the envconfig change an on-demand check tells. */
  resolvedOf?: (deployId: string) => Promise<ResolvedDeploy | undefined>;
  /** Submits the deploy of a heal (the engine's submit). */
  submit?: (s: Submission, by: { name: string; id: string }) => Promise<{ id: string }>;
}

/**
 * One drift check of an application's environment: the plugin's drift call with the recorded
 * release (the last succeeded deploy's version, targets and params from the envconfig now), the
 * result recorded per target, a `drifted` callback for what newly drifted, and, when the
 * envconfig asks and the check is a periodic one, a deploy of the recorded release to heal it.
 */
export class DriftChecker {
  constructor(private readonly opts: DriftCheckerOptions) {}

  /** On demand: the key's recorded release is looked up; none is `not_found`. */
  async checkKey(key: DeployKey): Promise<DriftReport & { envconfig: EnvconfigComparison }> {
    const release = await this.opts.store.recordedRelease(key);
    if (!release) {
      throw new ManentError(
        Code.NotFound,
        `no succeeded deploy of ${key.tenant}/${key.application} (artifact ${key.artifact}) in environment ${key.environment}: nothing to compare the targets with`,
      );
    }
    const { report, resolved } = await this.run(release, { heal: false });
    return { ...report, envconfig: await this.envconfigChange(release, resolved) };
  }

  /** The settings a deploy now would run (the rollout too, which a rollback's resolution leaves out) against the release's. */
  private async envconfigChange(release: RecordedRelease, r: ResolvedDeploy): Promise<EnvconfigComparison> {
    const deployed = await this.opts.resolvedOf?.(release.deploy_id);
    const { envconfig } = await findEnvconfig(this.opts.config, release);
    const current: RecordedSettings = {
      ...recordedSettings(r),
      ...(envconfig.rollout && { rollout: structuredClone(envconfig.rollout) }),
      ...(envconfig.rollout && envconfig.analysis && { analysis: structuredClone(envconfig.analysis) }),
    };
    return compareEnvconfig(deployed, current, { withRollout: release.kind === "deploy" });
  }

  async check(release: RecordedRelease, opts: { heal: boolean }): Promise<DriftReport> {
    return (await this.run(release, opts)).report;
  }

  private async run(release: RecordedRelease, opts: { heal: boolean }): Promise<{ report: DriftReport; resolved: ResolvedDeploy }> {
    const r = await this.resolve(release);
    const targets = await this.inspect(release, r);
    const key = { tenant: release.tenant, application: release.application, artifact: release.artifact, environment: release.environment };
    const report: DriftReport = { ...key, deploy_id: release.deploy_id, plugin: r.plugin, expected_version: release.version, targets };
    const changed = await this.opts.store.saveCheck(report);
    const newlyDrifted = changed.filter((t) => t.state === "drifted");
    if (newlyDrifted.length > 0) {
      this.opts.logger.warn("drift found", {
        tenant: release.tenant,
        application: release.application,
        environment: release.environment,
        targets: newlyDrifted.map((t) => t.target),
      });
      await this.callbacks(release, r, newlyDrifted);
    }
    const drifted = targets.some((t) => t.state === "drifted");
    if (opts.heal && drifted && r.drift?.heal) {
      const healed = await this.heal(release);
      if (healed) report.heal_deploy_id = healed;
    }
    return { report, resolved: r };
  }

  /** The release's submission resolved again, as a rollback to its version would be: nothing fetched, the envconfig as it is now. */
  private async resolve(release: RecordedRelease): Promise<ResolvedDeploy> {
    const req = release.request as { descriptor?: unknown; descriptorFile?: unknown };
    const submission: Submission = {
      kind: "rollback",
      descriptor: req.descriptor,
      descriptorFile: typeof req.descriptorFile === "string" ? req.descriptorFile : "descriptor",
      to: release.version,
    };
    const r = await resolveSubmission(this.opts.config, this.opts.plugins, submission, this.opts);
    return {
      ...r,
      artifact: { ...r.artifact, version: release.version, ...(release.fetched?.sha256 && { sha256: release.fetched.sha256 }) },
    };
  }

  private async inspect(release: RecordedRelease, r: ResolvedDeploy): Promise<TargetDriftRecord[]> {
    const now = new Date().toISOString();
    const record = (id: string, state: TargetDriftRecord["state"], extra: Partial<TargetDriftRecord>): TargetDriftRecord => ({
      tenant: release.tenant,
      application: release.application,
      artifact: release.artifact,
      environment: release.environment,
      target: id,
      state,
      deploy_id: release.deploy_id,
      plugin: r.plugin,
      expected_version: release.version,
      live_version: "",
      changes: [],
      ignored: [],
      reason: null,
      checked_at: now,
      changed_at: now,
      ...extra,
    });
    const plugin = this.opts.plugins.get(r.plugin);
    if (!plugin) throw new ManentError(Code.FailedPrecondition, `plugin ${r.plugin} is no longer configured in ${this.opts.config.file}`);
    const [caps, deployer] = await Promise.all([plugin.capabilities(), plugin.deployer()]);
    if (!caps.includes("drift") || !isDriftInspector(deployer)) {
      // A plugin from before drift (or one that cannot tell): not an error, just not known.
      const reason = `plugin ${r.plugin} does not report drift (it does not declare the drift capability)`;
      return r.targets.map((t) => record(targetId(t), "unknown", { reason }));
    }
    const refs = new Map<string, DeploySecretRef>(r.secrets.map((s) => [s.name, deploySecretRefSchema.parse(s.ref)]));
    const secrets = openCallSecrets(refs, "drift", this.opts.config.secretStores);
    const req: Request = {
      deploymentId: release.deploy_id,
      tenant: r.tenant,
      application: r.application,
      environment: r.environment,
      artifact: r.artifact,
      targets: r.targets,
      params: r.params,
      ...(r.drift?.ignore?.length && { ignore: r.drift.ignore }),
      secrets: secrets.accessor,
      parallelism: caps.includes("parallel_targets") ? r.parallel : 1,
      logger: this.opts.logger,
      signal: AbortSignal.timeout(r.steps.deploy.timeoutMs ?? defaultCheckTimeoutMs),
    };
    let found: TargetDrift[];
    try {
      found = await deployer.drift(req);
    } catch (err) {
      const reason = ManentError.from(err).message;
      this.opts.logger.warn("drift check failed", {
        tenant: r.tenant,
        application: r.application,
        environment: r.environment,
        error: reason,
      });
      return r.targets.map((t) => record(targetId(t), "error", { reason }));
    } finally {
      secrets.close();
    }
    const byId = new Map(found.map((d) => [d.host, d]));
    return r.targets.map((t) => {
      const d = byId.get(targetId(t));
      if (!d) return record(targetId(t), "unknown", { reason: `plugin ${r.plugin} did not report this target` });
      return record(targetId(t), stateOf(d), {
        live_version: d.version,
        changes: d.changes.map(clean),
        ignored: (d.ignored ?? []).map((c) => ({ ...clean(c), reason: String(c.reason ?? "") })),
        reason: d.details?.reason ?? null,
      });
    });
  }

  private async callbacks(release: RecordedRelease, r: ResolvedDeploy, drifted: TargetDriftRecord[]): Promise<void> {
    const payload: CallbackPayload = {
      event: "drifted",
      deploy: {
        id: release.deploy_id,
        kind: release.kind,
        tenant: release.tenant,
        application: release.application,
        artifact: release.artifact,
        environment: release.environment,
        version: release.version,
        plugin: r.plugin,
        status: "succeeded",
        error: null,
      },
      drift: { targets: drifted },
      sent_at: new Date().toISOString(),
    };
    for (const c of r.callbacks.filter((x) => x.events.includes("drifted"))) {
      for (let attempt = 0; ; attempt++) {
        try {
          await sendCallback(c, payload, AbortSignal.timeout(c.timeout * 2), this.opts.config, this.opts.network);
          break;
        } catch (err) {
          const e = ManentError.from(err);
          if (e.code !== Code.Unavailable || attempt >= c.max_retries) {
            // A receiver that is down must not stop the check; the log keeps the error.
            this.opts.logger.warn("drift callback failed", { url: c.url, error: e.message });
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, r.steps.deploy.intervalMs * 2 ** attempt));
        }
      }
    }
  }

  /**
   * Deploys the recorded release again: the version and bytes (source and sha256 its deploy
   * fetched) of the last succeeded deploy. Not while a later deploy exists (queued, running, or one
   * that failed: a heal that failed is not retried by itself).
   */
  private async heal(release: RecordedRelease): Promise<string | undefined> {
    if (!this.opts.submit || release.latest.id !== release.deploy_id) return undefined;
    const submission = releaseAgain(release);
    try {
      const { id } = await this.opts.submit(submission, healSubmitter);
      this.opts.logger.info("drift heal submitted", {
        deploy: id,
        tenant: release.tenant,
        application: release.application,
        environment: release.environment,
        version: release.version,
      });
      return id;
    } catch (err) {
      this.opts.logger.warn("drift heal could not be submitted", {
        tenant: release.tenant,
        application: release.application,
        environment: release.environment,
        error: ManentError.from(err).message,
      });
      return undefined;
    }
  }
}

function stateOf(d: TargetDrift): TargetDriftRecord["state"] {
  return d.status === DriftStatus.InSync ? "in_sync" : d.status === DriftStatus.Drifted ? "drifted" : "unknown";
}

/** Only the four fields, as strings: what a plugin sends is recorded and shown. */
function clean(c: DriftChange): DriftChange {
  return { object: String(c.object), field: String(c.field ?? ""), expected: String(c.expected ?? ""), live: String(c.live ?? "") };
}
