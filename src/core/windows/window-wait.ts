import { setTimeout as delay } from "node:timers/promises";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type { Logger } from "../contract/index.js";
import type { DeployStore, NewDeploy } from "../engine/deploy-store.js";
import type { DurableWaits } from "../engine/durable-waits.js";
import type { CancelWatch } from "../engine/user-cancel.js";
import { windowWait, type DeployWindows } from "./deploy-windows.js";
import type { WindowScope } from "./window-calendar.js";
import type { WindowOverrideStore, WindowOverrideWatch } from "./window-overrides.js";

export interface WindowWaitDeps {
  windows: DeployWindows;
  store: Pick<DeployStore, "createDeploy" | "setWaiting">;
  waits: DurableWaits;
  cancels: CancelWatch;
  logger: Logger;
  /** Overrides an admin gives a deploy already waiting (manent override-window). */
  windowOverrides?: { store: WindowOverrideStore; watch: WindowOverrideWatch };
}

/** The longest one timer runs before the windows are read again in memory (setTimeout's own bound is ~24.8 days). */
const rereadMs = 3_600_000;
/** How often a waiting deploy looks for a cancel taken by another server of the fleet (this server's wakes it at once). */
const cancelPollMs = 15_000;

/**
 * Holds a deploy of `scope` until its deploy windows let it run: each look at the windows is a
 * checkpointed step (the verdict, with the next opening and the rule that keeps it out), the wait
 * is counted among the durable waits (so it holds no work slot and a shutdown does not wait for
 * it), and the record shows `waiting` meanwhile. A server killed during the wait resumes it from
 * the checkpoint: the recorded opening, or an earlier one when the server came back with other
 * windows in manent.yml. An admin's override, recorded meanwhile, ends the wait at the next look.
 * Answers false when a user cancelled it meanwhile (the record says so).
 */
export async function waitForWindow(deps: WindowWaitDeps, id: string, scope: WindowScope, record: NewDeploy | undefined): Promise<boolean> {
  for (let round = 1; ; round++) {
    const v = await DBOS.runStep(
      async () => {
        const at = deps.windows.now();
        const override = await deps.windowOverrides?.store.find(id);
        if (override) return { open: true as const, at, override };
        const verdict = deps.windows.verdict(scope, at);
        return verdict.open ? { open: true as const, at } : { ...verdict, at };
      },
      { name: `window:${round}` },
    );
    if (v.open) {
      if ("override" in v && v.override) {
        deps.logger.info("deploy window overridden by an admin", { deploy: id, by: v.override.by, reason: v.override.reason });
      }
      if (round > 1) await DBOS.runStep(() => deps.store.setWaiting(id, null), { name: `window:${round}:open` });
      return true;
    }
    const wait = windowWait(v.rule, v.at, v.until);
    await DBOS.runStep(
      async () => {
        // The workflow writes its own record when the submission did not get to (engine.ts).
        if (record) await deps.store.createDeploy(record);
        await deps.store.setWaiting(id, wait);
      },
      { name: `window:${round}:waiting`, retriesAllowed: true, maxAttempts: 20, intervalSeconds: 0.5, backoffRate: 1.5 },
    );
    deps.logger.info("deploy waits for its deploy window", { deploy: id, until: wait.until, rule: v.rule });
    const cancelled = await deps.waits.during(id, () => sleepUntil(deps, id, scope, v.until));
    if (cancelled) {
      await deps.store.setWaiting(id, null).catch(() => undefined); // the record says cancelled
      return false;
    }
  }
}

/**
 * Sleeps until `until` (the checkpointed opening), or earlier when the windows in force now open
 * earlier; true when a user's cancel came first.
 */
async function sleepUntil(deps: WindowWaitDeps, id: string, scope: WindowScope, until: number | null): Promise<boolean> {
  const watch = deps.cancels.watch(id, cancelPollMs);
  const overridden = deps.windowOverrides?.watch.watch(id, cancelPollMs);
  const wake = overridden ? AbortSignal.any([watch.signal, overridden.signal]) : watch.signal;
  try {
    for (;;) {
      if (watch.signal.aborted) return true;
      if (overridden?.signal.aborted) return false; // the next look at the windows finds the override
      const now = deps.windows.now();
      const fresh = deps.windows.verdict(scope, now);
      const target = fresh.open ? now : Math.min(until ?? Infinity, fresh.until ?? Infinity);
      if (target <= now) return false;
      await delay(Math.min(target - now, rereadMs), undefined, { signal: wake }).catch(() => undefined);
    }
  } finally {
    watch.stop();
    overridden?.stop();
  }
}
