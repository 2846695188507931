/** Supervision knobs; the defaults follow the reference supervisors (kandev, ggscale). */
export interface SupervisionOptions {
  /** Health ping cadence (ggscale PingInterval 10s). */
  pingIntervalMs: number;
  /** Deadline of one ping. */
  pingTimeoutMs: number;
  /** Consecutive failed pings that mark a hung plugin, killed and restarted (both refs: 3). */
  pingFailureBudget: number;
  /** Consecutive failed lifecycles (crash, failed start) tolerated before giving up (kandev: 5). */
  maxRestarts: number;
  /** First restart delay, doubled per consecutive failure (kandev 1s/2s/4s/…). */
  backoffBaseMs: number;
  /** Cap of the restart delay (ggscale MaxBackoff 30s). */
  backoffMaxMs: number;
  /** Consecutive healthy pings that reset the failure count (ggscale HealthResetThreshold 30). */
  healthResetThreshold: number;
  /** After giving up, the wait before the supervisor tries again by itself (0: never). */
  cooldownMs: number;
  /** How long close() waits after GRPCController.Shutdown before SIGKILL (go-plugin: 2s). */
  shutdownGraceMs: number;
}

/** The ping defaults find a hung (e.g. SIGSTOPped) plugin within about 4 s: two checks of 1 s, 1 s apart. */
export const defaultSupervision: SupervisionOptions = {
  pingIntervalMs: 1_000,
  pingTimeoutMs: 1_000,
  pingFailureBudget: 2,
  maxRestarts: 5,
  backoffBaseMs: 1_000,
  backoffMaxMs: 30_000,
  healthResetThreshold: 30,
  cooldownMs: 300_000,
  shutdownGraceMs: 2_000,
};

/** Delay before the next start after `failures` consecutive failures (0 → none). */
export function backoffDelay(o: SupervisionOptions, failures: number): number {
  if (failures <= 0) return 0;
  return Math.min(o.backoffBaseMs * 2 ** (failures - 1), o.backoffMaxMs);
}
