import { readFile } from "node:fs/promises";

/** One line of the noop plugin's journal: a call it received. */
export interface JournalEntry {
  call: string;
  deployment: string;
  version: string;
  hosts: string[];
  /** Call-specific: a rollback's releases, a deploy_end's target statuses (`host=status,…`). */
  extra?: string;
  /** The `Request.traffic` the call received (percentage-rollout calls after PrepareSlots). */
  traffic?: Record<string, string>;
}

/** The calls the noop plugin recorded in its `journal` file, in order; none when it has no file yet. */
export async function readJournal(file: string): Promise<JournalEntry[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as JournalEntry);
}

/**
 * A deploy's calls as `call extra` lines, in order, without the candidate_weight lines (one a
 * target): the sequence the rollout tests compare, read one way for all of them.
 */
export async function deployCalls(file: string, id: string): Promise<string[]> {
  return (await readJournal(file))
    .filter((j) => j.deployment === id && j.call !== "candidate_weight")
    .map((j) => `${j.call}${j.extra ? ` ${j.extra}` : ""}`);
}
