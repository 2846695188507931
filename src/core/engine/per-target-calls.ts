import {
  TargetStatus,
  forEachTarget,
  targetId,
  resultOrThrow,
  type Deployer,
  type Request,
  type Result,
  type TargetOutcome,
} from "../contract/index.js";

/**
 * The deploy call (or a canary's DeployCandidate, `call`) of an external plugin, made once per target. The protocol has no per-target
 * stream: an external plugin's results arrive when its call returns, so a server that died during
 * one call of every target would give them all to the plugin again. One call per target,
 * `req.parallelism` at a time (what the plugin would run at once itself), lets each target be
 * recorded as it finishes, as a built-in's are; as in one call, no target is started after the
 * first failure. The plugin sees calls with one target each (as it sees a wave's subset).
 */
export async function deployPerTarget(
  deployer: Deployer,
  req: Request,
  call: (req: Request) => Promise<Result> = (r) => deployer.deploy(r),
): Promise<Result> {
  let plugin = deployer.name();
  let details: Record<string, string> | undefined;
  const out = await forEachTarget(req, async (target, signal): Promise<TargetOutcome> => {
    // forEachTarget reports each target's progress (a failed call's target as failed, with its error): the inner call must not report it twice.
    const r = await call({ ...req, targets: [target], parallelism: 1, signal, progress: undefined });
    plugin = r.plugin || plugin;
    if (r.details) details = { ...details, ...r.details };
    const own = r.targets.find((t) => t.host === targetId(target)) ?? r.targets[0];
    return own ? { ...own, host: targetId(target) } : { status: TargetStatus.Deployed };
  });
  return resultOrThrow({ plugin, targets: out.targets, ...(details && { details }) }, out.error);
}
