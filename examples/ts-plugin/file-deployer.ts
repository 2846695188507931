import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
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
 * The sample TypeScript external plugin, the twin of examples/go-plugin: it "deploys" an
 * artifact by writing, under the directory of the `base` param, for each target
 * `<host>/releases/<version>/artifact`, `<host>/key.sha256` (the hash of the secret, proving it
 * crossed the broker) and `<host>/current`. It shows a secret read during the call, dry-run,
 * current release, rollback, a permanent error on a bad param, parallel targets and logging.
 */
export const secretName = "deploy-key";

const configSchema = z.object({ name: z.string().min(1).default("sample-ts") });

/** `delay_ms` (wait per target) only exists to let tests interrupt a deploy. */
const paramsSchema = z.object({
  base: z.string().refine((s) => path.isAbsolute(s), "want an absolute directory"),
  fail_host: z.string().optional(),
  delay_ms: z.coerce.number().int().min(0).max(600_000).default(0),
});
type Params = z.infer<typeof paramsSchema>;

export const fileDeployerFactory: Factory = (config, logger) => {
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) throw new ManentError(Code.InvalidArgument, `config field ${issues(parsed.error)}`);
  return new FileDeployer(parsed.data.name, logger);
};

class FileDeployer implements Deployer, DryRunner, ReleaseInspector, Rollbacker, ParallelDeployer {
  constructor(
    private readonly pluginName: string,
    private readonly log: Logger,
  ) {}

  name(): string {
    return this.pluginName;
  }

  parallelTargets(): boolean {
    return true;
  }

  supports(artifact: Artifact): boolean {
    return artifact.type === "file";
  }

  async validate(req: Request): Promise<void> {
    params(req);
    if (req.artifact.version === "") throw permanent(new Error("artifact version is empty"));
    for (const t of req.targets) targetDir("/", t);
  }

  async deploy(req: Request): Promise<Result> {
    const p = params(req);
    // The secret is read once, during the call; a deploy with no targets touches nothing.
    let keyHash = "";
    if (req.targets.length > 0) keyHash = createHash("sha256").update(await req.secrets.secret(secretName)).digest("hex");
    this.log.info("deploy started", { deployment: req.deploymentId, targets: req.targets.length, parallelism: req.parallelism });
    const { targets, error } = await forEachTarget(req, async (t, signal) => {
      const dir = targetDir(p.base, t);
      if (p.delay_ms > 0) await sleep(p.delay_ms, undefined, { signal });
      if (t.host === p.fail_host) throw new Error(`target ${t.host}: failing as param fail_host asks`);
      await this.release(dir, req.artifact, keyHash);
      this.log.info("target deployed", { host: t.host, version: req.artifact.version });
      return { status: TargetStatus.Deployed, details: { path: dir } };
    });
    return resultOrThrow({ plugin: this.pluginName, targets }, error);
  }

  private async release(dir: string, a: Artifact, keyHash: string): Promise<void> {
    const rel = path.join(dir, "releases", a.version);
    await mkdir(rel, { recursive: true });
    await writeFile(path.join(rel, "artifact"), a.path ? await readFile(a.path) : `${a.name}\n`);
    await writeFile(path.join(dir, "key.sha256"), `${keyHash}\n`, { mode: 0o600 });
    await setCurrent(dir, a.version);
  }

  async dryRun(req: Request): Promise<Result> {
    const p = params(req);
    const { targets, error } = await forAllTargets(req, async (t) => {
      const current = await readCurrent(targetDir(p.base, t));
      return { status: current === req.artifact.version ? TargetStatus.Unchanged : TargetStatus.Ready, details: { current } };
    });
    return resultOrThrow({ plugin: this.pluginName, targets }, error);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const p = params(req);
    const out: TargetRelease[] = [];
    for (const t of req.targets) out.push({ host: t.host, version: await readCurrent(targetDir(p.base, t)) });
    return out;
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const p = params(req);
    const previous = new Map(req.releases.map((r) => [r.host, r.version]));
    const { targets, error } = await forAllTargets(req, async (t) => {
      const dir = targetDir(p.base, t);
      const version = previous.get(t.host);
      if (version === undefined) throw permanent(new Error(`target ${t.host}: no checkpointed release to roll back to`));
      await setCurrent(dir, version);
      this.log.info("target rolled back", { host: t.host, version });
      return { status: TargetStatus.RolledBack, details: { version } };
    });
    return resultOrThrow({ plugin: this.pluginName, targets }, error);
  }
}

function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
}

/** A bad param fails the same way on every retry: permanent, naming the param. */
function params(req: Request): Params {
  const parsed = paramsSchema.safeParse(req.params);
  if (!parsed.success) throw permanent(new ManentError(Code.InvalidArgument, `param ${issues(parsed.error)}`));
  return parsed.data;
}

/** A target's directory; the host name must not escape `base`. */
function targetDir(base: string, t: Target): string {
  if (t.host === "" || t.host === "." || t.host === ".." || /[/\\]/.test(t.host)) {
    throw permanent(new Error(`target ${JSON.stringify(t.host)}: not usable as a directory name`));
  }
  return path.join(base, t.host);
}

/** Records the version a target runs ("" removes it), through a rename so readers never see half. */
async function setCurrent(dir: string, version: string): Promise<void> {
  const cur = path.join(dir, "current");
  if (version === "") return rm(cur, { force: true });
  await mkdir(dir, { recursive: true });
  await writeFile(`${cur}.tmp`, `${version}\n`);
  await rename(`${cur}.tmp`, cur);
}

async function readCurrent(dir: string): Promise<string> {
  return (await readFile(path.join(dir, "current"), "utf8").catch(() => "")).trim();
}
