import { posix } from "node:path";
import { targetId, type Logger, type Request, type Target, type TargetOutcome } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { openTransport, type SshSecrets } from "./connect.js";
import { baseFor, type Params } from "./params.js";
import { activate, type TargetSite } from "./release-steps.js";
import { slotsFor } from "./slot-params.js";
import type { ActivationEnv } from "./remote-scripts.js";

/** What every per-target function of one plugin call shares. */
export interface CallContext {
  req: Request;
  params: Params;
  secrets: SshSecrets | undefined;
}

/** Opens the target's one connection for this call, runs `fn`, and always closes it. */
export async function withSite(
  call: CallContext,
  target: Target,
  signal: AbortSignal,
  fn: (site: TargetSite) => Promise<TargetOutcome>,
): Promise<TargetOutcome> {
  const slots = slotsFor(call.params.slot_ports, target);
  const t = await openTransport(call.params, call.secrets, target, signal);
  const log: Logger = call.req.logger;
  try {
    return await fn({
      t,
      host: target.host,
      name: targetId(target),
      base: baseFor(call.params, target),
      log,
      slots,
    });
  } finally {
    await t.close();
  }
}

/**
 * Runs the `activate` param's command in release `version`, when there is one; with slots, in
 * `slot` (the command is told which, and its port).
 */
export async function activateRelease(call: CallContext, site: TargetSite, version: string, slot?: string): Promise<void> {
  const { params, req } = call;
  if (!params.activate) return;
  await activate(site, params.activate, activationEnv(req, site, version, slot), params.activate_timeout);
}

/** Runs the `deactivate` param's command for `slot`, which runs release `version`. */
export async function deactivateSlot(call: CallContext, site: TargetSite, version: string, slot: string): Promise<void> {
  const { params, req } = call;
  if (!params.deactivate || version === "") return;
  await activate(site, params.deactivate, activationEnv(req, site, version, slot), params.activate_timeout, "deactivate");
}

/** The environment of the activate command. */
export function activationEnv(req: Request, site: TargetSite, version: string, slot?: string): ActivationEnv {
  const env: ActivationEnv = {
    MANENT_VERSION: version,
    MANENT_ENVIRONMENT: req.environment,
    MANENT_APPLICATION: req.application,
    MANENT_RELEASE_DIR: posix.join(site.base, "releases", version),
  };
  if (slot && site.slots) {
    env.MANENT_SLOT = slot;
    env.MANENT_PORT = String(site.slots.ports[slot]);
    env.MANENT_BASE = site.base;
    env.MANENT_HOST = site.host;
  }
  return env;
}

/**
 * Several failed targets are combined as `unavailable`; when the call was cancelled, what the
 * caller must see is `canceled`.
 */
export function callFailure(req: Request, error: ManentError | undefined): ManentError | undefined {
  if (!error || !req.signal.aborted || error.code === Code.Canceled) return error;
  return new ManentError(Code.Canceled, `cancelled: ${error.message}`, {
    cause: error,
    details: error.details,
  });
}
