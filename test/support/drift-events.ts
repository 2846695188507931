import assert from "node:assert/strict";
import type { ApiClient } from "../../src/cli/api-client.js";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { TargetDriftRecord } from "../../src/core/drift/drift-record.js";

/** The first drift.changed event of `application` after event `after` whose targets match, followed on the event stream (a 120 s safety deadline). */
export async function driftEvent(
  api: ApiClient,
  application: string,
  match: (targets: TargetDriftRecord[]) => boolean,
  after = 0,
): Promise<{ id: number; targets: TargetDriftRecord[] }> {
  let found: { id: number; targets: TargetDriftRecord[] } | undefined;
  await api.streamEvents(
    "/api/v1/events",
    (e: DeployEvent) => {
      if (e.type !== "drift.changed" || e.data.application !== application) return false;
      const targets = e.data.targets as TargetDriftRecord[];
      if (match(targets)) found = { id: e.id, targets };
      return found !== undefined;
    },
    { after, signal: AbortSignal.timeout(120_000) },
  );
  assert.ok(found, `no drift event of ${application} matched within 120 s`);
  return found;
}
