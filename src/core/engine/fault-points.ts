/**
 * Crash points for the recovery tests: `MANENT_FAULT_KILL_AT=<step>:<point>` makes the server
 * kill itself with SIGKILL at that point of that step, once — the way a power cut would.
 * Points: `before` (step started, no effect yet), `after` (effect done, checkpoint not written),
 * `checkpointed` (checkpoint written, next step not started), `approved` (an approval counted, more
 * awaited). Unset in production.
 */
export type FaultPoint = "before" | "after" | "checkpointed" | "approved";

const target = process.env.MANENT_FAULT_KILL_AT;
let fired = false;

export function faultPoint(step: string, point: FaultPoint): void {
  if (target === undefined || fired || target !== `${step}:${point}`) return;
  fired = true;
  process.kill(process.pid, "SIGKILL");
}
