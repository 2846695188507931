import assert from "node:assert/strict";
import type { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";

/**
 * Polls the deploy until `ok` holds and returns it; fails naming `what` if the deploy ends first or
 * the deadline passes (a safety net, so a stuck rollout fails its test instead of hanging it).
 */
export async function deployReaching(
  api: ApiClient,
  id: string,
  ok: (d: DeployRecord) => boolean,
  what: string,
  deadlineMs = 60_000,
): Promise<DeployRecord> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const d = await api.deploy(id);
    if (ok(d)) return d;
    if (Date.now() > deadline || ["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) {
      assert.fail(`deploy ${id} never reached: ${what} (status ${d.status}, ${JSON.stringify(d.rollout)})`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
