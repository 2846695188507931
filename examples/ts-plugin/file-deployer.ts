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
  type SlotDeployer,
  type SlotScaler,
  type Target,
  type TargetRelease,
  type TesterRouter,
  type TrafficRouter,
} from "../../src/plugin.js";
import {
  checkWeight,
  journal,
  otherSlot,
  readTrimmed,
  removeAll,
  replicasAt,
  slotsOf,
  trafficCandidate,
  trafficLive,
  writeAtomic,
  type Slot,
  type SlotPair,
} from "./slot-rollout.js";

/**
 * The sample TypeScript external plugin, the twin of examples/go-plugin: it "deploys" an
 * artifact by writing, under the directory of the `base` param, for each target
 * `<host>/releases/<version>/artifact`, `<host>/key.sha256` (the hash of the secret, proving it
 * crossed the broker) and `<host>/current`. It shows a secret read during the call, dry-run,
 * current release, rollback, a permanent error on a bad param, parallel targets, logging, and the
 * nine percentage-rollout calls on two slots per target (slot-rollout.ts).
 */
export const secretName = "deploy-key";

const configSchema = z.object({ name: z.string().min(1).default("sample-ts") });

/**
 * `delay_ms` (wait per target) only exists to let tests interrupt a deploy, `fail_weight` (a
 * weight change that fails) to drive a rollout's revert path; `replicas` is the candidate's size
 * at weight 100.
 */
const paramsSchema = z.object({
  base: z.string().refine((s) => path.isAbsolute(s), "want an absolute directory"),
  fail_host: z.string().optional(),
  delay_ms: z.coerce.number().int().min(0).max(600_000).default(0),
  fail_weight: z.coerce.number().int().min(0).max(100).optional(),
  replicas: z.coerce.number().int().min(1).max(1000).default(4),
});
type Params = z.infer<typeof paramsSchema>;

export const fileDeployerFactory: Factory = (config, logger) => {
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) throw new ManentError(Code.InvalidArgument, `config field ${issues(parsed.error)}`);
  return new FileDeployer(parsed.data.name, logger);
};

class FileDeployer
  implements Deployer, DryRunner, ReleaseInspector, Rollbacker, ParallelDeployer, SlotDeployer, TrafficRouter, TesterRouter, SlotScaler
{
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
    if (req.targets.length > 0)
      keyHash = createHash("sha256")
        .update(await req.secrets.secret(secretName))
        .digest("hex");
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
    await writeRelease(dir, a, keyHash);
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
  /** Parses the params, journals the call and, but for PrepareSlots, reads the traffic state. */
  private async rolloutCall(req: Request, call: string, weight?: number): Promise<{ p: Params; slots: SlotPair }> {
    const p = params(req);
    await journal(p.base, call, req, weight);
    return { p, slots: call === "PrepareSlots" ? { live: "blue", candidate: "green" } : slotsOf(req) };
  }

  /** Runs `fn` on every target in order, stopping at the first error. */
  private async eachTarget(p: Params, req: Request, fn: (t: Target, dir: string) => Promise<void>): Promise<void> {
    for (const t of req.targets) {
      const dir = targetDir(p.base, t);
      try {
        await fn(t, dir);
      } catch (err) {
        const e = ManentError.from(err);
        throw new ManentError(e.code, `target ${t.host}: ${e.message}`, { cause: err, details: e.details });
      }
    }
  }

  /** Finds the live slot (the same on every target) and names the other the candidate. */
  async prepareSlots(req: Request): Promise<Record<string, string>> {
    const { p } = await this.rolloutCall(req, "PrepareSlots");
    let live: Slot | undefined;
    await this.eachTarget(p, req, async (_t, dir) => {
      const l = ((await readTrimmed(path.join(dir, "live-slot"))) || "blue") as Slot;
      if (live !== undefined && l !== live) throw permanent(new Error(`live slot ${l}, but the targets before it serve from ${live}`));
      live = l;
      // The release the target runs now is the live slot's.
      const current = await readCurrent(dir);
      if (current) await writeAtomic(path.join(dir, "slots", l), current);
    });
    live ??= "blue";
    return { [trafficLive]: live, [trafficCandidate]: otherSlot(live), prepared_by: req.deploymentId };
  }

  /** Writes the release into the candidate slot of each target; the live slot keeps serving. */
  async deployCandidate(req: Request): Promise<Result> {
    const { p, slots } = await this.rolloutCall(req, "DeployCandidate");
    let keyHash = "";
    if (req.targets.length > 0)
      keyHash = createHash("sha256")
        .update(await req.secrets.secret(secretName))
        .digest("hex");
    const { targets, error } = await forEachTarget(req, async (t) => {
      const dir = targetDir(p.base, t);
      if (t.host === p.fail_host) throw new Error(`target ${t.host}: failing as param fail_host asks`);
      await writeRelease(dir, req.artifact, keyHash);
      await writeAtomic(path.join(dir, "slots", slots.candidate), req.artifact.version);
      this.log.info("candidate deployed", { host: t.host, version: req.artifact.version, slot: slots.candidate });
      return { status: TargetStatus.Deployed, details: { path: dir, slot: slots.candidate } };
    });
    return resultOrThrow({ plugin: this.pluginName, targets }, error);
  }

  /** Records the share of traffic the candidate slot gets on each target. */
  async setCandidateWeight(req: Request, weight: number): Promise<void> {
    const { p } = await this.rolloutCall(req, "SetCandidateWeight", weight);
    checkWeight(weight, p.fail_weight);
    await this.eachTarget(p, req, (_t, dir) => writeAtomic(path.join(dir, "weight"), String(weight)));
  }

  /** Reads the weight back; the targets must agree. */
  async candidateWeight(req: Request): Promise<number> {
    const { p } = await this.rolloutCall(req, "CandidateWeight");
    let weight: number | undefined;
    await this.eachTarget(p, req, async (_t, dir) => {
      const raw = await readTrimmed(path.join(dir, "weight"));
      const w = raw === "" ? 0 : Number(raw);
      if (!Number.isInteger(w)) throw new Error(`weight file holds ${JSON.stringify(raw)}`);
      if (weight !== undefined && w !== weight) throw new Error(`weight ${w}, but the targets before it have ${weight}`);
      weight = w;
    });
    return weight ?? 0;
  }

  /** Sizes the candidate slot for its weight: ceil(replicas × weight / 100). */
  async scaleCandidate(req: Request, weight: number): Promise<void> {
    const { p } = await this.rolloutCall(req, "ScaleCandidate", weight);
    checkWeight(weight, undefined);
    await this.eachTarget(p, req, (_t, dir) => writeAtomic(path.join(dir, "replicas"), String(replicasAt(p.replicas, weight))));
  }

  /** Sends requests carrying the tester header to the candidate slot. */
  async routeTesters(req: Request): Promise<Record<string, string>> {
    const { p, slots } = await this.rolloutCall(req, "RouteTesters");
    await this.eachTarget(p, req, (_t, dir) => writeAtomic(path.join(dir, "testers"), slots.candidate));
    return { slot: slots.candidate, header: `X-Manent-Slot: ${slots.candidate}` };
  }

  /** Makes the candidate slot the live one: it serves all traffic and is current. */
  async promoteCandidate(req: Request): Promise<void> {
    const { p, slots } = await this.rolloutCall(req, "PromoteCandidate");
    await this.eachTarget(p, req, async (_t, dir) => {
      const version = await readTrimmed(path.join(dir, "slots", slots.candidate));
      if (!version) throw new ManentError(Code.FailedPrecondition, `no candidate in slot ${slots.candidate} to promote`);
      await writeAtomic(path.join(dir, "live-slot"), slots.candidate);
      await setCurrent(dir, version);
      await removeAll(path.join(dir, "weight"), path.join(dir, "testers"));
    });
  }

  /** Empties the candidate slot; the live slot, which never stopped serving, stays. */
  async revertCandidate(req: Request): Promise<void> {
    const { p, slots } = await this.rolloutCall(req, "RevertCandidate");
    await this.eachTarget(p, req, async (_t, dir) => {
      if ((await readTrimmed(path.join(dir, "live-slot"))) === slots.candidate) {
        throw new ManentError(Code.FailedPrecondition, `slot ${slots.candidate} was already promoted`);
      }
      await removeAll(
        path.join(dir, "slots", slots.candidate),
        path.join(dir, "weight"),
        path.join(dir, "testers"),
        path.join(dir, "replicas"),
      );
    });
  }

  /** Empties the slot that served before the promotion. */
  async retirePrevious(req: Request): Promise<void> {
    const { p, slots } = await this.rolloutCall(req, "RetirePrevious");
    await this.eachTarget(p, req, async (_t, dir) => {
      if ((await readTrimmed(path.join(dir, "live-slot"))) !== slots.candidate) {
        throw new ManentError(Code.FailedPrecondition, `slot ${slots.live} still serves: promote the candidate first`);
      }
      await removeAll(path.join(dir, "slots", slots.live), path.join(dir, "replicas"));
    });
  }
}

/** Writes `releases/<version>/artifact` and `key.sha256`, without switching `current`. */
async function writeRelease(dir: string, a: Artifact, keyHash: string): Promise<void> {
  const rel = path.join(dir, "releases", a.version);
  await mkdir(rel, { recursive: true });
  await writeFile(path.join(rel, "artifact"), a.path ? await readFile(a.path) : `${a.name}\n`);
  await writeFile(path.join(dir, "key.sha256"), `${keyHash}\n`, { mode: 0o600 });
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
