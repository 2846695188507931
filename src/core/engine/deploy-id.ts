import { v7 } from "uuid";

/**
 * A new deploy's id: a UUID of version 7 (RFC 9562), its first 48 bits the time in milliseconds,
 * so ids sort in the order deploys were created. An index keyed by a deploy id (its record, steps,
 * targets, events, audit entries and DBOS's workflow rows) then takes new keys at its right edge,
 * where a full page is split unevenly and left full, instead of anywhere in it, where a split
 * leaves two half-full pages that random (version 4) ids fill to about two thirds: about 0.8 KB
 * less per no-op deploy when deploys follow each other (bench/deploy-commits.ts, relation bytes),
 * within the noise when 20 run at once (bench/retention.ts: the running ones share the last pages);
 * and the pages a deploy writes and reads are the recent ones, whatever the index's size. The time
 * it shows is the deploy's `created_at`, which whoever may read the id may read too; nothing relies
 * on ids being unguessable (access is by scope).
 */
export function newDeployId(): string {
  return v7();
}
