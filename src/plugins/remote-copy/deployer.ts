import { posix } from "node:path";
import {
  forAllTargets,
  forEachTarget,
  resultOrThrow,
  TargetStatus,
  type Artifact,
  type Deployer,
  type DryRunner,
  type Logger,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type RollbackRequest,
  type Rollbacker,
  type Target,
  type TargetOutcome,
  type TargetRelease,
  type TargetResult,
} from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { artifactFile, type ArtifactFile } from "./artifact-file.js";
import { openTransport, readSshSecrets, type SshSecrets } from "./connect.js";
import { baseFor, checkVersion, parseParams, type Params } from "./params.js";
import {
  dryRunScript,
  parseKeyValues,
  type ActivationEnv,
} from "./remote-scripts.js";
import * as steps from "./release-steps.js";
import type { TargetSite } from "./release-steps.js";

export const pluginName = "remote-copy";

/** Artifact types this plugin picks when an envconfig names no plugin. */
const supportedTypes = new Set(["file", "tarball", "archive"]);

/**
 * Copies an artifact to hosts, into `<base>/releases/<version>`, and switches `<base>/current`
 * to it atomically; over SSH or on the local filesystem.
 */
export class RemoteCopyDeployer
  implements Deployer, DryRunner, ReleaseInspector, Rollbacker, ParallelDeployer
{
  /** `defaults`: param values from manent.yml, overridden by the envconfig's. Logs go to `req.logger`. */
  constructor(private readonly defaults: Record<string, string>) {}

  name(): string {
    return pluginName;
  }

  supports(artifact: Artifact): boolean {
    return supportedTypes.has(artifact.type);
  }

  parallelTargets(): boolean {
    return true;
  }

  async validate(req: Request): Promise<void> {
    const params = this.params(req);
    checkVersion(req.artifact.version);
    if (
      params.transport === "local" &&
      req.targets.length > 1 &&
      !params.base.includes("{host}")
    ) {
      throw new ManentError(
        Code.InvalidArgument,
        "remote-copy: param base: must contain {host} when transport local has several targets (they would share one dir)",
        { details: { plugin: pluginName, param: "base" } },
      );
    }
    for (const t of req.targets) baseFor(params, t.host);
  }

  async deploy(req: Request): Promise<Result> {
    await this.validate(req);
    const params = this.params(req);
    const file = await artifactFile(req.artifact);
    const secrets = await this.secrets(params, req);
    const version = req.artifact.version;
    const outcome = await forEachTarget(req, (target, signal) =>
      this.withSite(
        params,
        secrets,
        target,
        signal,
        req.logger,
        async (site) => {
          const before = await steps.probe(site, version);
          const releasePath = `${site.base}/releases/${version}`;
          const details = {
            release_path: releasePath,
            previous_version: before.current,
            bytes_sent: "0",
          };
          if (before.current === version && before.exists) {
            site.log.info("release already current", {
              host: site.host,
              version,
            });
            return { status: TargetStatus.Unchanged, details };
          }
          if (!before.exists) {
            await steps.prepare(site, file.size);
            const sent = await steps.upload(
              site,
              file.path,
              version,
              file.fileName,
            );
            details.bytes_sent = String(sent);
            await steps.install(
              site,
              version,
              file.fileName,
              file.sha256,
              file.unpack,
            );
          }
          await steps.switchCurrent(site, version);
          site.log.info("current switched", {
            host: site.host,
            version,
            previous: before.current,
          });
          if (params.activate)
            await steps.activate(
              site,
              params.activate,
              this.env(req, site, version),
              params.activate_timeout,
            );
          const pruned = await steps.prune(
            site,
            params.keep_releases,
            version,
            before.current,
          );
          if (pruned.length > 0)
            site.log.info("old releases deleted", {
              host: site.host,
              releases: pruned,
            });
          return { status: TargetStatus.Deployed, details };
        },
      ),
    );
    return resultOrThrow(
      { plugin: pluginName, targets: complete(req, outcome.targets) },
      failure(req, outcome.error),
    );
  }

  async dryRun(req: Request): Promise<Result> {
    await this.validate(req);
    const params = this.params(req);
    const file = await artifactFile(req.artifact);
    const secrets = await this.secrets(params, req);
    const version = req.artifact.version;
    const outcome = await forAllTargets(req, (target, signal) =>
      this.withSite(
        params,
        secrets,
        target,
        signal,
        req.logger,
        async (site) => {
          const before = await steps.probe(site, version);
          const r = await site.t.exec(
            dryRunScript(site.base, params.activate !== undefined),
          );
          const kv = parseKeyValues(r.stdout);
          const checked = kv.get("checked")?.[0] ?? site.base;
          const missing = kv.get("missing") ?? [];
          const details: Record<string, string> = {
            release_path: `${site.base}/releases/${version}`,
            previous_version: before.current,
            bytes_to_send: before.exists ? "0" : String(file.size),
          };
          if (before.current === version && before.exists)
            return { status: TargetStatus.Unchanged, details };
          if (missing.length > 0) {
            throw new ManentError(
              Code.FailedPrecondition,
              `${site.host}: missing commands on the host: ${missing.join(", ")}`,
            );
          }
          if (kv.get("writable")?.[0] !== "1") {
            throw new ManentError(
              Code.Aborted,
              `${site.host}: ${checked} is not writable by the deploy user (base ${site.base})`,
              {
                details: { host: site.host, path: checked },
              },
            );
          }
          const availKb = Number(kv.get("avail_kb")?.[0] ?? NaN);
          if (
            !before.exists &&
            Number.isFinite(availKb) &&
            availKb * 1024 < file.size
          ) {
            throw new ManentError(
              Code.Aborted,
              `${site.host}: no space left on device for ${checked}: ${file.size} bytes needed, ${availKb * 1024} available`,
              {
                details: { host: site.host, path: checked },
              },
            );
          }
          return { status: TargetStatus.Ready, details };
        },
      ),
    );
    return resultOrThrow(
      { plugin: pluginName, targets: complete(req, outcome.targets) },
      failure(req, outcome.error),
    );
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const params = this.params(req);
    const secrets = await this.secrets(params, req);
    const releases = new Map<string, TargetRelease>();
    const outcome = await forAllTargets(req, (target, signal) =>
      this.withSite(
        params,
        secrets,
        target,
        signal,
        req.logger,
        async (site) => {
          const { current } = await steps.probe(site, "");
          releases.set(target.host, {
            host: target.host,
            version: current,
            details: {
              release_path: current ? `${site.base}/releases/${current}` : "",
            },
          });
          return {};
        },
      ),
    );
    if (outcome.error) throw failure(req, outcome.error);
    return req.targets.map((t) => releases.get(t.host)!);
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const params = this.params(req);
    const secrets = await this.secrets(params, req);
    const outcome = await forAllTargets(req, (target, signal) => {
      const recorded = req.releases.find((r) => r.host === target.host);
      if (!recorded) {
        return Promise.resolve<TargetOutcome>({
          status: TargetStatus.Skipped,
          details: {
            reason: "no release recorded for this host in the checkpoint",
          },
        });
      }
      if (recorded.version !== "") checkVersion(recorded.version);
      return this.withSite(
        params,
        secrets,
        target,
        signal,
        req.logger,
        (site) => this.restore(req, params, site, recorded.version),
      );
    });
    return resultOrThrow(
      { plugin: pluginName, targets: complete(req, outcome.targets) },
      failure(req, outcome.error),
    );
  }

  /** Puts one target back on `version` ("" = nothing deployed) without copying anything. */
  private async restore(
    req: Request,
    params: Params,
    site: TargetSite,
    version: string,
  ): Promise<TargetOutcome> {
    const before = await steps.probe(site, version);
    const details = {
      release_path: version ? `${site.base}/releases/${version}` : "",
      previous_version: before.current,
      bytes_sent: "0",
    };
    if (version === "") {
      if (before.current === "")
        return { status: TargetStatus.Unchanged, details };
      await steps.removeCurrent(site);
      site.log.warn("rollback removed current: nothing was deployed before", {
        host: site.host,
        removed: before.current,
      });
      return {
        status: TargetStatus.RolledBack,
        details: {
          ...details,
          note: "current removed: nothing was deployed before",
        },
      };
    }
    if (!before.exists) {
      throw new ManentError(
        Code.FailedPrecondition,
        `${site.host}: release ${version} is no longer in ${site.base}/releases; cannot roll back`,
        {
          details: {
            host: site.host,
            path: `${site.base}/releases/${version}`,
          },
        },
      );
    }
    if (before.current === version)
      return { status: TargetStatus.Unchanged, details };
    await steps.switchCurrent(site, version);
    site.log.info("rolled back", {
      host: site.host,
      version,
      from: before.current,
    });
    if (params.activate)
      await steps.activate(
        site,
        params.activate,
        this.env(req, site, version),
        params.activate_timeout,
      );
    return { status: TargetStatus.RolledBack, details };
  }

  /** Opens the target's one connection, runs `fn`, and always closes it. */
  private async withSite(
    params: Params,
    secrets: SshSecrets | undefined,
    target: Target,
    signal: AbortSignal,
    logger: Logger,
    fn: (site: TargetSite) => Promise<TargetOutcome>,
  ): Promise<TargetOutcome> {
    const t = await openTransport(params, secrets, target, signal);
    try {
      return await fn({
        t,
        host: target.host,
        base: baseFor(params, target.host),
        log: logger,
      });
    } finally {
      await t.close();
    }
  }

  private env(req: Request, site: TargetSite, version: string): ActivationEnv {
    return {
      MANENT_VERSION: version,
      MANENT_ENVIRONMENT: req.environment,
      MANENT_APPLICATION: req.application,
      MANENT_RELEASE_DIR: posix.join(site.base, "releases", version),
    };
  }

  private params(req: Request): Params {
    return parseParams({ ...this.defaults, ...req.params });
  }

  private secrets(
    params: Params,
    req: Request,
  ): Promise<SshSecrets | undefined> {
    return params.transport === "ssh"
      ? readSshSecrets(params, req)
      : Promise.resolve(undefined);
  }
}

/**
 * forEachTarget builds its results with `Array.map` over a sparse array, which skips the holes
 * of targets never started; they are filled in here as `skipped` (harmless once it is fixed).
 */
function complete(req: Request, results: TargetResult[]): TargetResult[] {
  return Array.from(
    req.targets,
    (t, i) => results[i] ?? { host: t.host, status: TargetStatus.Skipped },
  );
}

/**
 * Several failed targets are combined as `unavailable`; when the call was cancelled, what the
 * caller must see is `canceled`.
 */
function failure(
  req: Request,
  error: ManentError | undefined,
): ManentError | undefined {
  if (!error || !req.signal.aborted || error.code === Code.Canceled)
    return error;
  return new ManentError(Code.Canceled, `cancelled: ${error.message}`, {
    cause: error,
    details: error.details,
  });
}
