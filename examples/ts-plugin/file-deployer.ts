import { createHash } from "node:crypto";
import { access, constants, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import {
  Code,
  forAllTargets,
  forEachTarget,
  ManentError,
  permanent,
  resultOrThrow,
  TargetStatus,
  type Artifact,
  type Deployer,
  type DryRunner,
  type Factory,
  type Logger,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type Rollbacker,
  type RollbackRequest,
  type Target,
  type TargetRelease,
} from "../../src/plugin.js";

/**
 * A sample external plugin that "deploys" by writing files: for each target it writes
 * `<root>/<host>/releases/<version>` and points `<root>/<host>/current` at it. It shows every
 * part of the contract: a secret read during the call, dry-run, current release, rollback, a
 * permanent error on a bad parameter and parallel targets.
 */
const configSchema = z.object({
  root: z.string().min(1),
  artifact_types: z.array(z.string()).default(["file"]),
});

/** Params this plugin understands. `delay_ms` and `fail_host` exist to exercise the host. */
const paramsSchema = z.object({
  mode: z.enum(["write", "touch"]).default("write"),
  delay_ms: z.coerce.number().int().min(0).max(600_000).default(0),
  fail_host: z.string().optional(),
});

export const fileDeployerFactory: Factory = (config, logger) => {
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) {
    throw new ManentError(Code.InvalidArgument, `file-deployer configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  return new FileDeployer(parsed.data.root, parsed.data.artifact_types, logger);
};

class FileDeployer implements Deployer, DryRunner, ReleaseInspector, Rollbacker, ParallelDeployer {
  constructor(
    private readonly root: string,
    private readonly types: string[],
    private readonly log: Logger,
  ) {}

  name(): string {
    return "file-deployer";
  }

  parallelTargets(): boolean {
    return true;
  }

  supports(artifact: Artifact): boolean {
    return this.types.includes(artifact.type);
  }

  async validate(req: Request): Promise<void> {
    params(req);
  }

  async deploy(req: Request): Promise<Result> {
    const p = params(req);
    if (req.targets.length === 0) return { plugin: this.name(), targets: [] };
    // The secret is read during the call; only its hash is written, to show it was received.
    const key = await req.secrets.secret("deploy-key");
    const content = req.artifact.path ? await readFile(req.artifact.path) : Buffer.from(req.artifact.version);
    const { targets, error } = await forEachTarget(req, async (t, signal) => {
      if (p.delay_ms > 0) await sleep(p.delay_ms, undefined, { signal });
      if (t.host === p.fail_host) throw new ManentError(Code.Unavailable, `target ${t.host}: refused by fail_host`);
      const dir = this.dir(t);
      await mkdir(path.join(dir, "releases"), { recursive: true });
      await writeFile(path.join(dir, "releases", req.artifact.version), p.mode === "write" ? content : "");
      await writeFile(path.join(dir, "deploy-key.sha256"), createHash("sha256").update(key).digest("hex"));
      await writeFile(path.join(dir, "current"), req.artifact.version);
      this.log.info("target deployed", { host: t.host, version: req.artifact.version, deployment: req.deploymentId });
      return { details: { path: dir } };
    });
    return resultOrThrow({ plugin: this.name(), targets }, error);
  }

  async dryRun(req: Request): Promise<Result> {
    params(req);
    await req.secrets.secret("deploy-key");
    const { targets, error } = await forAllTargets(req, async () => {
      await access(this.root, constants.W_OK).catch(() => {
        throw new ManentError(Code.FailedPrecondition, `root ${this.root} is not writable`);
      });
      return { status: TargetStatus.Ready };
    });
    return resultOrThrow({ plugin: this.name(), targets }, error);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    return Promise.all(
      req.targets.map(async (t) => ({
        host: t.host,
        version: await readFile(path.join(this.dir(t), "current"), "utf8").catch(() => ""),
      })),
    );
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const wanted = new Map(req.releases.map((r) => [r.host, r.version]));
    const { targets, error } = await forAllTargets(req, async (t) => {
      const version = wanted.get(t.host) ?? "";
      const current = path.join(this.dir(t), "current");
      if (version === "") await rm(current, { force: true });
      else await writeFile(current, version);
      return { status: TargetStatus.RolledBack, details: { version } };
    });
    return resultOrThrow({ plugin: this.name(), targets }, error);
  }

  private dir(t: Target): string {
    // Host names become directory names: refuse anything that could leave the root.
    if (!/^[A-Za-z0-9._-]+$/.test(t.host) || t.host.startsWith(".")) throw permanent(new Error(`target host ${JSON.stringify(t.host)} is not a plain name`));
    return path.join(this.root, t.host);
  }
}

function params(req: Request): z.infer<typeof paramsSchema> {
  const parsed = paramsSchema.safeParse(req.params);
  if (!parsed.success) {
    // A bad parameter fails the same way on every retry: permanent.
    throw permanent(new ManentError(Code.InvalidArgument, `param ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`));
  }
  return parsed.data;
}
