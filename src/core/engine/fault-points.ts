/**
 * Crash points for the recovery tests: `MANENT_FAULT_KILL_AT=<step>:<point>` makes the server
 * kill itself with SIGKILL at that point of that step, once — the way a power cut would.
 * Points: `before` (the attempt's start recorded, no effect yet), `after` (effect done, checkpoint
 * not written), `checkpointed` (checkpoint committed: with the deploy's next statement, which is
 * most often the next step's start, see `WriteHold`), `approved` (an approval counted, more
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

/**
 * Hold points for the race tests: `MANENT_FAULT_PAUSE_AT=<step>:<point>` makes the server stop
 * there, once, writing `fault point <step>:<point>: paused` to stderr, until it receives SIGUSR2;
 * a test then acts while the step is held (no sleep decides what runs first). Unset in production.
 */
const pauseAt = process.env.MANENT_FAULT_PAUSE_AT;
let paused = false;

export async function faultPause(step: string, point: string): Promise<void> {
  if (pauseAt === undefined || paused || pauseAt !== `${step}:${point}`) return;
  paused = true;
  const resumed = new Promise<void>((resolve) => process.once("SIGUSR2", () => resolve()));
  process.stderr.write(`${JSON.stringify({ level: "warn", msg: `fault point ${step}:${point}: paused` })}\n`);
  await resumed;
}
