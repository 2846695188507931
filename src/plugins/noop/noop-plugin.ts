import { appendFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import {
  Code,
  ManentError,
  TargetStatus,
  forAllTargets,
  forEachTarget,
  permanent,
  resultOrThrow,
  type Artifact,
  type Deployer,
  type DryRunner,
  type Factory,
  type ParallelDeployer,
  type ReleaseInspector,
  type Request,
  type Result,
  type RollbackRequest,
  type Rollbacker,
  type TargetRelease,
  type TargetOutcome,
} from "../../plugin.js";
import { validate } from "../../core/config/yaml-file.js";
import { durationMs } from "../../core/config/duration.js";

/**
 * Params of the `noop` plugin, which changes nothing outside its own state: the null resource of
 * manent, for trying a pipeline, measuring the orchestrator and exercising failures.
 */
const paramsSchema = z.looseObject({
  /** Directory keeping the release of each target, so current release and rollback work across restarts. */
  state_dir: z.string().min(1).optional(),
  /** File where every call appends one JSON line (call, deployment, version, hosts); a deploy also its end (`deploy_end`). */
  journal: z.string().min(1).optional(),
  /** Hosts (comma-separated) whose deploy fails. */
  fail_hosts: z.string().optional(),
  /** How the listed hosts fail: `permanent` (no retry) or `transient` (retried). */
  fail_mode: z.enum(["permanent", "transient"]).default("permanent"),
  /** Fail only the first N deploy calls of a deployment (transient failures that a retry fixes). */
  fail_times: z.coerce.number().int().min(0).optional(),
  /** Time spent on each target. */
  delay: durationMs.optional(),
  /** A secret to read on each target, proving it is reachable; only its length is reported. */
  read_secret: z.string().min(1).optional(),
});
type Params = z.output<typeof paramsSchema>;

class NoopDeployer implements Deployer, DryRunner, ReleaseInspector, Rollbacker, ParallelDeployer {
  private readonly memory = new Map<string, string>();
  private readonly calls = new Map<string, number>();

  constructor(private readonly artifactTypes: string[]) {}

  name(): string {
    return "noop";
  }

  supports(artifact: Artifact): boolean {
    return this.artifactTypes.includes(artifact.type);
  }

  parallelTargets(): boolean {
    return true;
  }

  async validate(req: Request): Promise<void> {
    params(req);
  }

  async dryRun(req: Request): Promise<Result> {
    const p = params(req);
    await journal(p, "dry_run", req);
    const out = await forAllTargets(req, async () => ({ status: TargetStatus.Ready, details: { version: req.artifact.version } }));
    return resultOrThrow({ plugin: "noop", targets: out.targets }, out.error);
  }

  async currentRelease(req: Request): Promise<TargetRelease[]> {
    const p = params(req);
    return Promise.all(req.targets.map(async (t) => ({ host: t.host, version: await this.read(p, t.host) })));
  }

  async deploy(req: Request): Promise<Result> {
    const p = params(req);
    await journal(p, "deploy", req);
    const call = (this.calls.get(req.deploymentId) ?? 0) + 1;
    this.calls.set(req.deploymentId, call);
    const failing = new Set((p.fail_hosts ?? "").split(",").filter(Boolean));
    const out = await forEachTarget(req, async (t, signal): Promise<TargetOutcome> => {
      if (p.delay) await sleep(p.delay, signal);
      if (failing.has(t.host) && (p.fail_times === undefined || call <= p.fail_times)) {
        const err = new ManentError(Code.Unavailable, `target ${t.host}: failing as configured (call ${call})`);
        throw p.fail_mode === "permanent" ? permanent(err) : err;
      }
      const secret: Record<string, string> = p.read_secret ? { secret_length: String((await req.secrets.secret(p.read_secret)).length) } : {};
      const previous = await this.read(p, t.host);
      if (previous === req.artifact.version) return { status: TargetStatus.Unchanged, details: { version: previous, ...secret } };
      await this.write(p, t.host, req.artifact.version);
      return { details: { version: req.artifact.version, previous_version: previous, ...secret } };
    });
    // The end of the call too, so a test can await the moment the plugin stopped working.
    await journal(p, "deploy_end", req, out.targets.map((t) => `${t.host}=${t.status}`).join(","));
    return resultOrThrow({ plugin: "noop", targets: out.targets }, out.error);
  }

  async rollback(req: RollbackRequest): Promise<Result> {
    const p = params(req);
    await journal(p, "rollback", req, req.releases.map((r) => `${r.host}=${r.version}`).join(","));
    const out = await forAllTargets(req, async (t) => {
      const to = req.releases.find((r) => r.host === t.host)?.version ?? "";
      await this.write(p, t.host, to);
      return { status: TargetStatus.RolledBack, details: { version: to } };
    });
    return resultOrThrow({ plugin: "noop", targets: out.targets }, out.error);
  }

  private async read(p: Params, host: string): Promise<string> {
    if (!p.state_dir) return this.memory.get(host) ?? "";
    return readFile(join(p.state_dir, `${host}.release`), "utf8").catch(() => "");
  }

  private async write(p: Params, host: string, version: string): Promise<void> {
    if (!p.state_dir) {
      this.memory.set(host, version);
      return;
    }
    await mkdir(p.state_dir, { recursive: true });
    await writeFile(join(p.state_dir, `${host}.release`), version);
  }
}

function params(req: Request): Params {
  return validate(req.params, "params", paramsSchema);
}

async function journal(p: Params, call: string, req: Request, extra?: string): Promise<void> {
  if (!p.journal) return;
  const line = { call, deployment: req.deploymentId, version: req.artifact.version, hosts: req.targets.map((t) => t.host), ...(extra && { extra }) };
  await appendFile(p.journal, `${JSON.stringify(line)}\n`);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new ManentError(Code.Canceled, "cancelled"));
    }, { once: true });
  });
}

const configSchema = z.strictObject({ artifact_types: z.array(z.string()).default(["noop"]) });

export const noopFactory: Factory = (config) => {
  const c = validate(config, "plugins.noop", configSchema);
  return new NoopDeployer(c.artifact_types);
};
