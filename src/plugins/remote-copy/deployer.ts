import {
  forAllTargets,
  forEachTarget,
  resultOrThrow,
  TargetStatus,
  type Artifact,
  type Deployer,
  type DryRunner,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type RollbackRequest,
  type Rollbacker,
  type TargetOutcome,
  type TargetRelease,
  type TargetsOutcome,
} from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { artifactFile } from "./artifact-file.js";
import { readSshSecrets } from "./connect.js";
import { deployTarget } from "./deploy-target.js";
import { dryRunTarget } from "./dry-run-target.js";
import { baseFor, checkVersion, parseParams } from "./params.js";
import { probe } from "./release-steps.js";
import { restoreTarget } from "./restore-target.js";
import {
  callFailure,
  withSite,
  type CallContext,
} from "./site.js";

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
    const params = parseParams({ ...this.defaults, ...req.params });
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
    const file = await artifactFile(req.artifact);
    const call = await this.call(req);
    const outcome = await forEachTarget(req, (target, signal) =>
      withSite(call, target, signal, (site) => deployTarget(call, site, file)),
    );
    return this.result(req, outcome);
  }

  async dryRun(req: Request): Promise<Result> {
    await this.validate(req);
    const file = await artifactFile(req.artifact);
    const call = await this.call(req);
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, (site) => dryRunTarget(call, site, file)),
    );
    return this.result(req, outcome);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const call = await this.call(req);
    const releases = new Map<string, TargetRelease>();
    const outcome = await forAllTargets(req, (target, signal) =>
      withSite(call, target, signal, async (site) => {
        const { current } = await probe(site, "");
        const release_path = current ? `${site.base}/releases/${current}` : "";
        releases.set(target.host, {
          host: target.host,
          version: current,
          details: { release_path },
        });
        return {};
      }),
    );
    const error = callFailure(req, outcome.error);
    if (error) throw error;
    return req.targets.map((t) => releases.get(t.host)!);
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const call = await this.call(req);
    const outcome = await forAllTargets(
      req,
      async (target, signal): Promise<TargetOutcome> => {
        const recorded = req.releases.find((r) => r.host === target.host);
        if (!recorded) {
          return {
            status: TargetStatus.Skipped,
            details: {
              reason: "no release recorded for this host in the checkpoint",
            },
          };
        }
        if (recorded.version !== "") checkVersion(recorded.version);
        return withSite(call, target, signal, (site) =>
          restoreTarget(call, site, recorded.version),
        );
      },
    );
    return this.result(req, outcome);
  }

  /** Params and secrets, read once per call (secrets only for the SSH transport). */
  private async call(req: Request): Promise<CallContext> {
    const params = parseParams({ ...this.defaults, ...req.params });
    const secrets =
      params.transport === "ssh"
        ? await readSshSecrets(params, req)
        : undefined;
    return { req, params, secrets };
  }

  private result(req: Request, outcome: TargetsOutcome): Result {
    return resultOrThrow(
      { plugin: pluginName, targets: outcome.targets },
      callFailure(req, outcome.error),
    );
  }
}
