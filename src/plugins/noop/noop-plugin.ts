import { appendFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
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
  targetId,
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
  type DriftInspector,
  type TargetDrift,
  type HeaderRoute,
  Capability,
  DriftStatus,
  type SlotDeployer,
  type SlotScaler,
  type TesterRouter,
  type TrafficRouter,
} from "../../plugin.js";
import { validate } from "../../core/config/yaml-file.js";
import { durationMs } from "../../core/config/duration.js";
import { RecentCounts } from "./recent-counts.js";

/**
 * Params of the `noop` plugin, which changes nothing outside its own state: the null resource of
 * manent, for trying a pipeline, measuring the orchestrator and exercising failures.
 */
export const paramsSchema = z.looseObject({
  state_dir: z
    .string()
    .min(1)
    .optional()
    .describe("Directory keeping the release of each target, so current release and rollback work across restarts."),
  journal: z
    .string()
    .min(1)
    .optional()
    .describe(
      "File where every call appends one JSON line (call, deployment, version, hosts: the targets by name, else host); a deploy also its end (`deploy_end`).",
    ),
  journal_targets: z
    .stringbool()
    .default(false)
    .describe(
      "With `journal`, a deploy also journals each target as it changes it (`deploy_target`, one host), and a canary each candidate (`deploy_candidate_target`).",
    ),
  fail_hosts: z
    .string()
    .optional()
    .describe(
      "Targets (comma-separated, by name, else host) whose deploy fails; with `fail_at` or `fail_at_weight`, the calls on them only.",
    ),
  fail_mode: z
    .enum(["permanent", "transient", "unimplemented"])
    .default("permanent")
    .describe(
      "How the listed hosts (and `fail_at`, `fail_at_weight`) fail: `permanent` (no retry), `transient` (retried) or `unimplemented` (as a plugin lacking the call).",
    ),
  fail_at: z
    .string()
    .optional()
    .describe(
      "Percentage-rollout calls (comma-separated) that fail: prepare_slots, deploy_candidate, route_testers, set_candidate_weight, scale_candidate, set_header_route, set_mirror, promote_candidate, revert_candidate, retire_previous.",
    ),
  fail_at_weight: z.coerce.number().int().min(0).max(100).optional().describe("SetCandidateWeight to this weight fails."),
  fail_times: z.coerce
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .optional()
    .describe("Fail only the first N deploy calls of a deployment (transient failures that a retry fixes)."),
  delay: durationMs.optional().describe("Time spent on each target."),
  read_secret: z
    .string()
    .min(1)
    .optional()
    .describe("A secret to read on each target, proving it is reachable; only its length is reported."),
});
type Params = z.output<typeof paramsSchema>;

class NoopDeployer
  implements
    Deployer,
    DryRunner,
    ReleaseInspector,
    Rollbacker,
    ParallelDeployer,
    SlotDeployer,
    TrafficRouter,
    TesterRouter,
    SlotScaler,
    DriftInspector
{
  private readonly memory = new Map<string, string>();
  /** Deploy calls per deployment, for `fail_times`: bounded, as the plugin lives as long as the server. */
  private readonly calls = new RecentCounts(1000);

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
    return Promise.all(req.targets.map(async (t) => ({ host: targetId(t), version: await this.read(p, targetId(t)) })));
  }

  /** The release each target's state records, against the one asked about: a state file edited by hand is drift. */
  async drift(req: Request): Promise<TargetDrift[]> {
    const p = params(req);
    await journal(p, "drift", req);
    return Promise.all(
      req.targets.map(async (t): Promise<TargetDrift> => {
        const live = await this.read(p, targetId(t));
        const same = live === req.artifact.version;
        return {
          host: targetId(t),
          status: same ? DriftStatus.InSync : DriftStatus.Drifted,
          version: live,
          changes: same ? [] : [{ object: "release", field: "version", expected: req.artifact.version, live }],
        };
      }),
    );
  }

  async deploy(req: Request): Promise<Result> {
    const p = params(req);
    await journal(p, "deploy", req);
    const failing = new Set((p.fail_hosts ?? "").split(",").filter(Boolean));
    // Counted only when some host fails as configured: a plain no-op deploy keeps nothing.
    const call = failing.size ? this.calls.increment(req.deploymentId) : 0;
    const out = await forEachTarget(req, async (t, signal): Promise<TargetOutcome> => {
      if (p.delay) await sleep(p.delay, signal);
      if (failing.has(targetId(t)) && (p.fail_times === undefined || call <= p.fail_times)) {
        throw failure(p, `target ${targetId(t)}: failing as configured (call ${call})`);
      }
      const secret: Record<string, string> = p.read_secret
        ? { secret_length: String((await req.secrets.secret(p.read_secret)).length) }
        : {};
      const previous = await this.read(p, targetId(t));
      if (previous === req.artifact.version) return { status: TargetStatus.Unchanged, details: { version: previous, ...secret } };
      await this.write(p, targetId(t), req.artifact.version);
      // The target's effect, as it happens: a test can tell which targets a resumed deploy did again.
      if (p.journal_targets) await journal(p, "deploy_target", { ...req, targets: [t] });
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
      const to = req.releases.find((r) => r.host === targetId(t))?.version ?? "";
      await this.write(p, targetId(t), to);
      await this.write(p, targetId(t), "", "candidate");
      return { status: TargetStatus.RolledBack, details: { version: to } };
    });
    return resultOrThrow({ plugin: "noop", targets: out.targets }, out.error);
  }

  // Percentage rollouts. Each target has a stable release, a candidate slot and the candidate's
  // weight; every call after PrepareSlots checks that it received the state PrepareSlots returned.

  async prepareSlots(req: Request): Promise<Record<string, string>> {
    const p = await this.slotCall(req, "prepare_slots", req.rollout?.sessionAffinity ? "session_affinity" : undefined, false);
    const previous = req.targets.length ? await this.read(p, targetId(req.targets[0]!)) : "";
    return { deployment: req.deploymentId, candidate_slot: "candidate", previous_version: previous };
  }

  async deployCandidate(req: Request): Promise<Result> {
    const p = await this.slotCall(req, "deploy_candidate");
    const out = await forEachTarget(req, async (t, signal): Promise<TargetOutcome> => {
      if (p.delay) await sleep(p.delay, signal);
      await this.write(p, targetId(t), req.artifact.version, "candidate");
      await this.write(p, targetId(t), "0", "weight");
      if (p.journal_targets) await journal(p, "deploy_candidate_target", { ...req, targets: [t] });
      return { details: { version: req.artifact.version, slot: "candidate" } };
    });
    return resultOrThrow({ plugin: "noop", targets: out.targets }, out.error);
  }

  async routeTesters(req: Request): Promise<Record<string, string>> {
    await this.slotCall(req, "route_testers");
    return { header: "x-manent-candidate", value: req.artifact.version };
  }

  async setCandidateWeight(req: Request, weight: number): Promise<void> {
    const p = await this.slotCall(req, "set_candidate_weight", `weight=${weight}`);
    if (p.fail_at_weight === weight && onFailingHosts(p, req)) throw failure(p, `weight ${weight}: failing as configured (fail_at_weight)`);
    for (const t of req.targets) await this.write(p, targetId(t), String(weight), "weight");
  }

  async candidateWeight(req: Request): Promise<number> {
    const p = await this.slotCall(req, "candidate_weight");
    return Number((req.targets.length && (await this.read(p, targetId(req.targets[0]!), "weight"))) || 0);
  }

  async setHeaderRoute(req: Request, route: HeaderRoute | null): Promise<void> {
    await this.slotCall(req, "set_header_route", route ? `${route.type} ${route.name}=${route.value}` : "off");
  }

  async setMirror(req: Request, percent: number): Promise<void> {
    await this.slotCall(req, "set_mirror", `percent=${percent}`);
  }

  /** Needs no call of its own: PrepareSlots journals that the rollout asked for it. */
  sessionAffinity(): boolean {
    return true;
  }

  async scaleCandidate(req: Request, weight: number): Promise<void> {
    await this.slotCall(req, "scale_candidate", `weight=${weight}`);
  }

  async promoteCandidate(req: Request): Promise<void> {
    const p = await this.slotCall(req, "promote_candidate");
    for (const t of req.targets) {
      const candidate = await this.read(p, targetId(t), "candidate");
      // Promoted already (a call repeated after a crash): nothing left to do.
      if (!candidate && (await this.read(p, targetId(t))) === req.artifact.version) continue;
      if (!candidate) throw permanent(new ManentError(Code.FailedPrecondition, `target ${targetId(t)}: no candidate to promote`));
      await this.write(p, targetId(t), candidate);
      await this.write(p, targetId(t), "", "candidate");
      await this.write(p, targetId(t), "0", "weight");
    }
  }

  async revertCandidate(req: Request): Promise<void> {
    const p = await this.slotCall(req, "revert_candidate");
    for (const t of req.targets) {
      await this.write(p, targetId(t), "", "candidate");
      await this.write(p, targetId(t), "0", "weight");
    }
  }

  async retirePrevious(req: Request): Promise<void> {
    await this.slotCall(req, "retire_previous");
  }

  /** Journals a slot call, checks the traffic state (unless it is PrepareSlots) and fails it when configured to. */
  private async slotCall(req: Request, call: string, extra?: string, needsTraffic = true): Promise<Params> {
    const p = params(req);
    await journal(p, call, req, extra);
    if (needsTraffic && req.traffic?.deployment !== req.deploymentId) {
      throw permanent(
        new ManentError(Code.FailedPrecondition, `${call}: the traffic state PrepareSlots returned was not passed (Request.traffic)`),
      );
    }
    if ((p.fail_at ?? "").split(",").includes(call) && onFailingHosts(p, req)) throw failure(p, `${call}: failing as configured (fail_at)`);
    return p;
  }

  /** State is kept per target identity (its name, else its host): two targets on one host are two records. */
  private async read(p: Params, host: string, kind: StateKind = "release"): Promise<string> {
    if (!p.state_dir) return this.memory.get(`${host}.${kind}`) ?? "";
    return readFile(join(p.state_dir, `${host}.${kind}`), "utf8").catch(() => "");
  }

  private async write(p: Params, host: string, value: string, kind: StateKind = "release"): Promise<void> {
    if (!p.state_dir) {
      this.memory.set(`${host}.${kind}`, value);
      return;
    }
    await mkdir(p.state_dir, { recursive: true });
    if (kind !== "release" && value === "") await rm(join(p.state_dir, `${host}.${kind}`), { force: true });
    else await writeFile(join(p.state_dir, `${host}.${kind}`), value);
  }
}

type StateKind = "release" | "candidate" | "weight";

/** Without fail_hosts, every call fails as configured; with them, only calls on one of them. */
function onFailingHosts(p: Params, req: Request): boolean {
  const failing = new Set((p.fail_hosts ?? "").split(",").filter(Boolean));
  return failing.size === 0 || req.targets.some((t) => failing.has(targetId(t)));
}

function failure(p: Params, message: string): ManentError {
  if (p.fail_mode === "unimplemented") return new ManentError(Code.Unimplemented, message);
  const err = new ManentError(Code.Unavailable, message);
  return p.fail_mode === "permanent" ? permanent(err) : err;
}

function params(req: Request): Params {
  return validate(req.params, "params", paramsSchema);
}

async function journal(p: Params, call: string, req: Request, extra?: string): Promise<void> {
  if (!p.journal) return;
  const line = {
    call,
    deployment: req.deploymentId,
    version: req.artifact.version,
    hosts: req.targets.map(targetId),
    ...(extra && { extra }),
    ...(req.traffic && { traffic: req.traffic }),
  };
  await appendFile(p.journal, `${JSON.stringify(line)}\n`);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(new ManentError(Code.Canceled, "cancelled"));
      },
      { once: true },
    );
  });
}

export const configSchema = z.strictObject({
  artifact_types: z.array(z.string()).default(["noop"]).describe("Artifact types the plugin accepts"),
  without: z
    .array(z.enum(Capability))
    .default([])
    .describe("Optional interfaces to leave out, so drills and tests can act as a plugin without them (e.g. [slots])."),
});

const methodsOf: Record<Capability, string[]> = {
  dry_run: ["dryRun"],
  current_release: ["currentRelease"],
  rollback: ["rollback"],
  slots: ["prepareSlots", "deployCandidate", "promoteCandidate", "revertCandidate", "retirePrevious"],
  traffic_router: ["setCandidateWeight", "candidateWeight"],
  testers: ["routeTesters"],
  scale: ["scaleCandidate"],
  parallel_targets: ["parallelTargets"],
  drift: ["drift"],
  header_route: ["setHeaderRoute"],
  mirror: ["setMirror"],
  session_affinity: ["sessionAffinity"],
};

export const noopFactory: Factory = (config) => {
  const c = validate(config, "plugins.noop", configSchema);
  const deployer = new NoopDeployer(c.artifact_types);
  if (c.without.length === 0) return deployer;
  const hidden = new Set(c.without.flatMap((cap) => methodsOf[cap]));
  return new Proxy(deployer, {
    get: (target, key, receiver) => (typeof key === "string" && hidden.has(key) ? undefined : Reflect.get(target, key, receiver)),
  });
};
