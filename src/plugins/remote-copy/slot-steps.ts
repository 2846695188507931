import { basename } from "node:path";
import { Code, ManentError } from "../../core/errors.js";
import { parseKeyValues } from "./remote-scripts.js";
import { siteLabel, type TargetSite } from "./release-steps.js";
import { sq, tail } from "./shell.js";
import type { Slots } from "./slot-params.js";
import { activateRelease, type CallContext } from "./site.js";

/**
 * The slot layout beside `current` on a host: `slots/<slot>` links to the release each slot
 * runs, and `.live-slot` names the slot that serves users. `current` always points to the live
 * slot's release, so `currentRelease`, history and rollback keep working as without slots.
 */
export interface SlotProbe {
  /** The version `current` points to; "" when there is none. */
  current: string;
  /** The slot named by `.live-slot`; "" when the host has never had one. */
  live: string;
  /** The version each slot's link points to ("" for none). */
  versions: Record<string, string>;
}

export async function probeSlots(site: TargetSite, slots: Slots): Promise<SlotProbe> {
  const lines = [
    `cd ${sq(site.base)} 2>/dev/null || exit 0`,
    `printf 'current=%s\\n' "$(readlink current 2>/dev/null)"`,
    `printf 'live=%s\\n' "$(head -n1 .live-slot 2>/dev/null)"`,
    ...slots.names.map((s) => `printf 'slot.${s}=%s\\n' "$(readlink ${sq(`slots/${s}`)} 2>/dev/null)"`),
  ];
  const r = await site.t.exec(lines.join("\n"));
  if (r.code !== 0) throw hostFailure(site, "reading the slots", r.stderr, r.code);
  const kv = parseKeyValues(r.stdout);
  const link = (k: string): string => {
    const v = kv.get(k)?.[0] ?? "";
    return v === "" ? "" : basename(v);
  };
  const live = kv.get("live")?.[0] ?? "";
  return {
    current: link("current"),
    live: slots.names.includes(live) ? live : "",
    versions: Object.fromEntries(slots.names.map((s) => [s, link(`slot.${s}`)])),
  };
}

/** Points `slots/<slot>` at `releases/<version>` (atomically, as `current`), bumping its mtime for pruning. */
export async function linkSlot(site: TargetSite, slot: string, version: string): Promise<void> {
  const script = [
    "set -e",
    `cd ${sq(site.base)}`,
    "mkdir -p slots",
    `touch ${sq(`releases/${version}`)}`,
    `ln -sfn ${sq(`../releases/${version}`)} slots/.tmp.$$`,
    `mv -T slots/.tmp.$$ ${sq(`slots/${slot}`)}`,
  ].join("\n");
  const r = await site.t.exec(script);
  if (r.code !== 0) throw hostFailure(site, `linking slot ${slot} to ${version}`, r.stderr, r.code);
}

/** Records the live slot (written to a temporary file, renamed over `.live-slot`). */
export async function setLiveSlot(site: TargetSite, slot: string): Promise<void> {
  const script = [
    "set -e",
    `mkdir -p ${sq(site.base)} && cd ${sq(site.base)}`,
    `printf '%s\\n' ${sq(slot)} > .live-slot.tmp.$$`,
    "mv -f .live-slot.tmp.$$ .live-slot",
  ].join("\n");
  const r = await site.t.exec(script);
  if (r.code !== 0) throw hostFailure(site, `recording live slot ${slot}`, r.stderr, r.code);
}

function hostFailure(site: TargetSite, doing: string, stderr: string, code: number | null): ManentError {
  const permission = /Permission denied|Read-only file system|Operation not permitted/i.test(stderr);
  return new ManentError(
    permission ? Code.Aborted : Code.Internal,
    `${siteLabel(site)}: ${doing} in ${site.base} (exit code ${code}): ${tail(stderr, 5)}`,
    {
      details: { host: site.host, path: site.base },
    },
  );
}

/**
 * Activates `version` after a plain deploy or a rollback switched `current` to it: with slots, in
 * the host's live slot (the first slot on a host that never had one), whose link follows.
 */
export async function activateLive(call: CallContext, site: TargetSite, version: string): Promise<void> {
  if (!site.slots) return activateRelease(call, site, version);
  const { live } = await probeSlots(site, site.slots);
  const slot = live || site.slots.names[0];
  await linkSlot(site, slot, version);
  if (!live) await setLiveSlot(site, slot);
  await activateRelease(call, site, version, slot);
}
