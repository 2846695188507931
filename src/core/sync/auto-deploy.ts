import type { Logger } from "../contract/index.js";
import { findEnvconfig, type LoadedConfig } from "../config/index.js";
import { Code, ManentError } from "../errors.js";
import type { DeployKey } from "../engine/deploy-store.js";
import type { Submission } from "../engine/resolve.js";
import type { RecordedRelease } from "../drift/drift-record.js";
import { releaseAgain } from "../drift/release-again.js";

/** Who an auto-deploy names as its submitter. */
export const autoDeploySubmitter = { name: "manent auto-deploy", id: "system:auto-deploy" };

/** One auto-deploy this look submitted, or tried to. */
export interface AutoDeployResult extends DeployKey {
  /** The commit whose envconfig it deploys, and that file's sha256 (null: the envconfig does not load). */
  commit: string | null;
  sha256: string | null;
  deploy_id?: string;
  /** Why it could not be submitted (the envconfig at that commit refused, say). */
  error?: string;
}

/** Where the claims live (Postgres): one auto-deploy per key and envconfig content, whichever server sees it first. */
export interface AutoDeployClaims {
  /** True for exactly one caller per key and content, across every server sharing the database. */
  claim(key: DeployKey, sha256: string, commit: string): Promise<boolean>;
  /** What the claim led to. */
  settle(key: DeployKey, sha256: string, outcome: { deploy_id: string } | { error: string }): Promise<void>;
  /** Gives a claim back: its submission failed for a reason the next look may not meet (the database away). */
  drop(key: DeployKey, sha256: string): Promise<void>;
}

export interface AutoDeployOptions {
  config: LoadedConfig;
  /** The releases running in each environment, with the envconfig each and the latest deploy ran (the drift store). */
  releases: { recordedReleases(): Promise<RecordedRelease[]> };
  claims: AutoDeployClaims;
  submit: (s: Submission, by: { name: string; id: string }) => Promise<{ id: string }>;
  logger: Logger;
}

/**
 * Changes as releases: after each fetch of a git envconfig provider, every environment whose
 * envconfig asks for `auto_deploy` and changed on the tracked ref gets a deploy of the release
 * running there with the new envconfig, through the queue and rollout like any deploy. Once per
 * content (a later commit that changes nothing of the file deploys nothing; a rollback to an older
 * release is not undone), and never while a deploy of the key is queued or running (the next look,
 * after the next fetch, sees it).
 */
export class AutoDeployer {
  private inflight: Promise<AutoDeployResult[]> | undefined;

  constructor(private readonly opts: AutoDeployOptions) {}

  /** Looks once; a look asked for while one runs joins it. */
  run(): Promise<AutoDeployResult[]> {
    this.inflight ??= this.look().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async look(): Promise<AutoDeployResult[]> {
    const results: AutoDeployResult[] = [];
    for (const release of await this.opts.releases.recordedReleases()) {
      if (release.latest.status === "queued" || release.latest.status === "running") continue;
      const key = {
        tenant: release.tenant,
        application: release.application,
        artifact: release.artifact,
        environment: release.environment,
      };
      let found;
      try {
        found = await findEnvconfig(this.opts.config, key);
      } catch (err) {
        // Whether it asks for auto_deploy cannot be read: told at every look while the ref holds it, never deployed.
        const e = ManentError.from(err);
        if (release.envconfig?.provider === "git" && e.code === Code.InvalidArgument) {
          this.opts.logger.warn("envconfig from git does not load: nothing auto-deployed", { ...key, error: e.message });
          results.push({ ...key, commit: null, sha256: null, error: `the envconfig does not load: ${e.message}` });
        }
        continue;
      }
      const origin = found.origin;
      if (!found.envconfig.auto_deploy || origin?.provider !== "git" || origin.commit === undefined) continue;
      // Deployed already (by the release, or by the latest deploy, whatever became of it).
      if (origin.sha256 === release.envconfig?.sha256 || origin.sha256 === release.latest.envconfig?.sha256) continue;
      if (!(await this.opts.claims.claim(key, origin.sha256, origin.commit))) continue;
      results.push(await this.submit(release, key, origin.sha256, origin.commit));
    }
    return results;
  }

  private async submit(release: RecordedRelease, key: DeployKey, sha256: string, commit: string): Promise<AutoDeployResult> {
    const where = { ...key, commit, sha256 };
    try {
      const { id } = await this.opts.submit(releaseAgain(release), autoDeploySubmitter);
      await this.opts.claims.settle(key, sha256, { deploy_id: id });
      this.opts.logger.info("envconfig changed: auto-deploy submitted", { deploy: id, ...where, version: release.version });
      return { ...where, deploy_id: id };
    } catch (err) {
      const e = ManentError.from(err);
      this.opts.logger.warn("envconfig changed: auto-deploy could not be submitted", { ...where, error: e.message });
      // Refused input stays refused for this content; anything else is tried again at the next look.
      if (e.code === Code.InvalidArgument || e.code === Code.FailedPrecondition)
        await this.opts.claims.settle(key, sha256, { error: e.message });
      else await this.opts.claims.drop(key, sha256);
      return { ...where, error: e.message };
    }
  }
}
