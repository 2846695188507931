import { wfQueueRunner } from "@dbos-inc/dbos-sdk/internal/wfqueue";
import { workflowTimeoutConfig } from "@dbos-inc/dbos-sdk/internal/workflow_management";

/**
 * How often DBOS's maintenance loops for features manent does not use still run: promoting delayed
 * (debounced) workflows and cancelling workflows past a deadline. manent starts no workflow with a
 * delay or a timeout, and each loop is a statement, a commit, every second on every idle server.
 */
const unusedLoopMs = 60_000;

/**
 * How often DBOS's queue runner reads its queues table for queues registered since: manent's two
 * are given to the runner as they are registered (queue-wake.ts), and each server claims by its
 * own limits, not the table's, so a look is only for what another server's registration changed.
 */
const queueTableLookMs = 30_000;

/**
 * How long DBOS gathers the notifications of `DBOS.setEvent` and `DBOS.writeStream` before it sends
 * them (its `notificationCoalesceMs`, 10 ms by default). Its notifier wakes at that interval whether
 * or not anything was written, and manent writes neither (its workflows' messages go through
 * `DBOS.send`, notified by a trigger): at 10 ms an idle server woke its event loop about 300 times
 * a second for nothing, about 3% of a CPU, once per server of a fleet.
 */
export const notificationCoalesceMs = 1000;

/**
 * Slows those loops down. They are internal to DBOS, so each setting is changed only where it is
 * what is expected (a number); otherwise DBOS keeps its own. Process-wide, as the loops are.
 */
export function slowDbosIdleLoops(): void {
  const runner = wfQueueRunner.constructor as { transitionIntervalMs?: unknown; reconcileIntervalMs?: unknown };
  if (typeof runner.transitionIntervalMs === "number") runner.transitionIntervalMs = unusedLoopMs;
  if (typeof runner.reconcileIntervalMs === "number") runner.reconcileIntervalMs = queueTableLookMs;
  const timeouts = workflowTimeoutConfig as { pollingIntervalMs?: unknown } | undefined;
  if (timeouts && typeof timeouts.pollingIntervalMs === "number") timeouts.pollingIntervalMs = unusedLoopMs;
}
