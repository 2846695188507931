import { appendFile, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { Code, ManentError, permanent, type Request } from "../../src/plugin.js";

/**
 * Percentage rollouts of the sample plugin, the twin of examples/go-plugin/rollout.go. Each target
 * has two slots, blue and green: `<host>/live-slot` says which one serves (blue when absent),
 * `<host>/slots/<slot>` which version a slot holds. PrepareSlots picks the other slot as the
 * candidate and returns both in its state, which the host passes back in `Request.traffic` on
 * every later call: the plugin keeps no memory of its own between calls, so a call without that
 * state fails. Weight, scale and testers are files: `<host>/weight`, `<host>/replicas`,
 * `<host>/testers`. Every call appends what it received to `<base>/rollout.jsonl`.
 */
export const trafficLive = "live_slot";
export const trafficCandidate = "candidate_slot";

export type Slot = "blue" | "green";
export interface SlotPair {
  live: Slot;
  candidate: Slot;
}

export const otherSlot = (s: Slot): Slot => (s === "blue" ? "green" : "blue");
const isSlot = (s: string | undefined): s is Slot => s === "blue" || s === "green";

/** The state PrepareSlots returned, read back from the request. */
export function slotsOf(req: Request): SlotPair {
  const live = req.traffic?.[trafficLive];
  const candidate = req.traffic?.[trafficCandidate];
  if (!isSlot(live) || !isSlot(candidate) || live === candidate) {
    throw new ManentError(
      Code.FailedPrecondition,
      `Request.traffic lacks the state PrepareSlots returned (live_slot, candidate_slot): got ${JSON.stringify(req.traffic ?? {})}`,
    );
  }
  return { live, candidate };
}

/** Appends the call, the traffic state it received and its weight to `<base>/rollout.jsonl`. */
export async function journal(base: string, call: string, req: Request, weight?: number): Promise<void> {
  await mkdir(base, { recursive: true });
  const entry: Record<string, unknown> = { call, traffic: req.traffic ?? {} };
  if (weight !== undefined) entry.weight = weight;
  await appendFile(path.join(base, "rollout.jsonl"), `${JSON.stringify(entry)}\n`);
}

export async function readTrimmed(file: string): Promise<string> {
  return (await readFile(file, "utf8").catch(() => "")).trim();
}

export async function writeAtomic(file: string, content: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(`${file}.tmp`, `${content}\n`);
  await rename(`${file}.tmp`, file);
}

export async function removeAll(...files: string[]): Promise<void> {
  for (const f of files) await rm(f, { force: true });
}

/** Checks a weight (0–100) and the failure the `fail_weight` param injects. */
export function checkWeight(weight: number, failWeight: number | undefined): void {
  if (!Number.isInteger(weight) || weight < 0 || weight > 100)
    throw new ManentError(Code.InvalidArgument, `weight ${weight}: want 0 to 100`);
  if (weight === failWeight) throw permanent(new Error(`failing at weight ${weight} as param fail_weight asks`));
}

/** Replicas of the candidate at a weight: ceil(replicas × weight / 100). */
export const replicasAt = (replicas: number, weight: number): number => Math.ceil((replicas * weight) / 100);
