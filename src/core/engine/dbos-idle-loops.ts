import { wfQueueRunner } from "@dbos-inc/dbos-sdk/internal/wfqueue";
import { workflowTimeoutConfig } from "@dbos-inc/dbos-sdk/internal/workflow_management";

/**
 * How often DBOS's maintenance loops for features manent does not use still run: promoting delayed
 * (debounced) workflows and cancelling workflows past a deadline. manent starts no workflow with a
 * delay or a timeout, and each loop is a statement, a commit, every second on every idle server.
 */
const unusedLoopMs = 60_000;

/**
 * Slows those loops down. They are internal to DBOS, so each setting is changed only where it is
 * what is expected (a number); otherwise DBOS keeps its own. Process-wide, as the loops are.
 */
export function slowUnusedDbosLoops(): void {
  const runner = wfQueueRunner.constructor as { transitionIntervalMs?: unknown };
  if (typeof runner.transitionIntervalMs === "number") runner.transitionIntervalMs = unusedLoopMs;
  const timeouts = workflowTimeoutConfig as { pollingIntervalMs?: unknown } | undefined;
  if (timeouts && typeof timeouts.pollingIntervalMs === "number") timeouts.pollingIntervalMs = unusedLoopMs;
}
