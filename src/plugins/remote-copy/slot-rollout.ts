import { TargetStatus, targetId, type Request, type Target, type TargetOutcome } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { ArtifactFile } from "./artifact-file.js";
import { SlotTraffic, type SlotPair } from "./haproxy/slot-traffic.js";
import * as steps from "./release-steps.js";
import { siteLabel, type TargetSite } from "./release-steps.js";
import { activateRelease, deactivateSlot, type CallContext } from "./site.js";
import { otherSlot, type Slots } from "./slot-params.js";
import { linkSlot, probeSlots, setLiveSlot } from "./slot-steps.js";

/**
 * The state PrepareSlots records, passed back in every later call (`Request.traffic`): per target,
 * the live slot and the candidate's, and the version live when the rollout began. Keys are
 * `live/<target>`, `candidate/<target>`, `live_version/<target>`, the target by its identity (its name, else its host).
 */
export function slotState(pairs: (SlotPair & { liveVersion: string })[]): Record<string, string> {
  const state: Record<string, string> = {};
  for (const p of pairs) {
    state[`live/${p.name}`] = p.live;
    state[`candidate/${p.name}`] = p.candidate;
    state[`live_version/${p.name}`] = p.liveVersion;
  }
  return state;
}

/** The slot pair of each target of the request, from the recorded state. */
export function pairsOf(req: Request): SlotPair[] {
  return req.targets.map((t) => pairOf(req, t));
}

export function pairOf(req: Request, target: Target): SlotPair {
  const name = targetId(target);
  const live = req.traffic?.[`live/${name}`];
  const candidate = req.traffic?.[`candidate/${name}`];
  if (!live || !candidate) {
    throw new ManentError(
      Code.FailedPrecondition,
      `remote-copy: no slot state for target ${name} in the request (PrepareSlots records it and manent passes it in every later call)`,
      { details: { plugin: "remote-copy", host: name } },
    );
  }
  return { host: target.host, name, live, candidate, empty: req.traffic?.[`live_version/${name}`] === "" };
}

export function needSlots(site: TargetSite): Slots {
  if (site.slots) return site.slots;
  throw new ManentError(
    Code.FailedPrecondition,
    `remote-copy: target ${siteLabel(site)} has no slots: set param slot_ports (e.g. blue=8081,green=8082) for a percentage rollout`,
    { details: { plugin: "remote-copy", param: "slot_ports", host: site.host } },
  );
}

/** The HAProxy router of the params, undefined when none is configured. */
export function trafficOf(call: CallContext): SlotTraffic | undefined {
  const { params } = call;
  if (!params.haproxy_socket || !params.haproxy_backend) return undefined;
  return new SlotTraffic(
    {
      socket: params.haproxy_socket,
      backend: params.haproxy_backend,
      server: params.haproxy_server,
      testerBackend: params.haproxy_tester_backend,
      routeAcl: params.haproxy_route_acl,
      sticky: call.req.rollout?.sessionAffinity === true,
    },
    call.req.logger,
  );
}

export function needTraffic(call: CallContext): SlotTraffic {
  const t = trafficOf(call);
  if (t) return t;
  throw new ManentError(
    Code.FailedPrecondition,
    "remote-copy: no traffic router: set params haproxy_socket and haproxy_backend to move traffic between slots",
    { details: { plugin: "remote-copy", param: "haproxy_socket" } },
  );
}

/** Reads which slot is live on the host; a host that never had one adopts its first slot for `current`. */
export async function prepareTarget(site: TargetSite): Promise<SlotPair & { liveVersion: string }> {
  const slots = needSlots(site);
  const probe = await probeSlots(site, slots);
  let live = probe.live;
  if (!live) {
    live = slots.names[0];
    if (probe.current) await linkSlot(site, live, probe.current);
    await setLiveSlot(site, live);
  }
  return { host: site.host, name: site.name, live, candidate: otherSlot(slots, live), liveVersion: probe.current };
}

/**
 * Installs the candidate release and starts it in the candidate slot, out of rotation: its
 * servers get weight 0 (and leave the tester backend) before it starts and become ready after.
 */
export async function deployCandidateTarget(
  call: CallContext,
  site: TargetSite,
  pair: SlotPair,
  file: ArtifactFile,
  traffic: SlotTraffic | undefined,
): Promise<TargetOutcome> {
  const slots = needSlots(site);
  const version = call.req.artifact.version;
  const probe = await probeSlots(site, slots);
  if (probe.live && probe.live !== pair.live) {
    throw new ManentError(
      Code.FailedPrecondition,
      `${siteLabel(site)}: live slot is ${probe.live}, the rollout's state says ${pair.live}: another deploy changed the host since PrepareSlots`,
      { details: { host: site.host } },
    );
  }
  const details = {
    release_path: `${site.base}/releases/${version}`,
    slot: pair.candidate,
    port: String(slots.ports[pair.candidate]),
    live_slot: pair.live,
    previous_version: probe.current,
    bytes_sent: "0",
  };
  if (traffic) {
    await traffic.quiesce(pair, pair.candidate, call.req.signal);
    await traffic.drain([{ ...pair, slot: pair.candidate }], call.params.drain_timeout, call.req.signal);
  }
  const before = await steps.probe(site, version);
  if (!before.exists) {
    await steps.prepare(site, file.size);
    details.bytes_sent = String(await steps.upload(site, file.path, version, file.fileName));
    await steps.install(site, version, file.fileName, file.sha256, file.unpack);
  }
  await linkSlot(site, pair.candidate, version);
  await activateRelease(call, site, version, pair.candidate);
  if (traffic) await traffic.ready(pair, pair.candidate, call.req.signal);
  site.log.info("candidate started", { host: site.host, version, slot: pair.candidate });
  return { status: TargetStatus.Deployed, details };
}

/** Makes the candidate slot the host's live one: `.live-slot` and `current` follow it. */
export async function promoteTarget(call: CallContext, site: TargetSite, pair: SlotPair): Promise<TargetOutcome> {
  const slots = needSlots(site);
  const probe = await probeSlots(site, slots);
  const version = probe.versions[pair.candidate] ?? "";
  if (!version) {
    throw new ManentError(Code.FailedPrecondition, `${siteLabel(site)}: slot ${pair.candidate} holds no release: nothing to promote`, {
      details: { host: site.host },
    });
  }
  await setLiveSlot(site, pair.candidate);
  if (probe.current !== version) await steps.switchCurrent(site, version);
  const pruned = await steps.prune(site, call.params.keep_releases, version, probe.versions[pair.live] ?? "");
  site.log.info("candidate promoted", { host: site.host, version, slot: pair.candidate, pruned });
  return { status: TargetStatus.Deployed, details: { slot: pair.candidate, version, previous_version: probe.current } };
}

/** Checks that the host was promoted before its previous slot is stopped (it would otherwise be the live one). */
export async function checkPromoted(site: TargetSite, pair: SlotPair): Promise<string> {
  const probe = await probeSlots(site, needSlots(site));
  if (probe.live !== pair.candidate) {
    throw new ManentError(
      Code.FailedPrecondition,
      `${siteLabel(site)}: live slot is still ${probe.live || "(none)"}: promote the candidate (slot ${pair.candidate}) before retiring the previous slot`,
      { details: { host: site.host } },
    );
  }
  return probe.versions[pair.live] ?? "";
}

/** Stops a slot that HAProxy no longer sends anything to. */
export async function stopSlot(call: CallContext, site: TargetSite, slot: string): Promise<TargetOutcome> {
  const probe = await probeSlots(site, needSlots(site));
  const version = probe.versions[slot] ?? "";
  await deactivateSlot(call, site, version, slot);
  site.log.info("slot stopped", { host: site.host, slot, version });
  return { status: TargetStatus.Deployed, details: { slot, version } };
}

/**
 * Puts the host's live slot back as it was when the rollout began: after a promote, `.live-slot`
 * and `current` return to it and it is started again (its previous slot may have been stopped).
 */
export async function restoreLiveTarget(call: CallContext, site: TargetSite, pair: SlotPair): Promise<TargetOutcome> {
  const probe = await probeSlots(site, needSlots(site));
  const version = probe.versions[pair.live] ?? "";
  if (probe.live === pair.live || probe.live === "") return { status: TargetStatus.Unchanged, details: { slot: pair.live, version } };
  if (!version) {
    throw new ManentError(Code.FailedPrecondition, `${siteLabel(site)}: slot ${pair.live} holds no release: cannot make it live again`, {
      details: { host: site.host },
    });
  }
  await setLiveSlot(site, pair.live);
  if (probe.current !== version) await steps.switchCurrent(site, version);
  await activateRelease(call, site, version, pair.live);
  site.log.warn("promotion reverted", { host: site.host, slot: pair.live, version });
  return { status: TargetStatus.RolledBack, details: { slot: pair.live, version } };
}
