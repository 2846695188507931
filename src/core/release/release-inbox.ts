import { DBOS } from "@dbos-inc/dbos-sdk";
import type { DurableWaits } from "../engine/durable-waits.js";

/** The DBOS topic release commands travel on (durably: a command sent while the release's server is down is read when it resumes). */
export const releaseTopic = "manent.release";

export interface ReleaseCommand {
  command: "approve" | "promote" | "cancel";
  /** The 1-based stage it is for (approve, promote); a command for another stage than the one waited at is ignored. */
  stage?: number;
  by: string | null;
  by_id?: string;
  at: string;
}

export type InboxOutcome = { ended: "timeout" } | { ended: "command"; message: ReleaseCommand };

const maxWaitMs = 24 * 3_600_000;
/** How often a wait looks for a command itself, in case the Postgres NOTIFY that should wake it is lost. */
const commandPollMs = 1000;

/**
 * The commands a release workflow has read, through DBOS.recv (checkpointed: a resumed workflow
 * reads the same commands at the same points). A cancel is remembered and ends every wait.
 */
export class ReleaseInbox {
  cancelled: ReleaseCommand | undefined;

  constructor(private readonly waits: DurableWaits) {}

  /** Reads, without waiting, what was sent since the last look. */
  async poll(): Promise<void> {
    for (;;) {
      const m = await DBOS.recv<ReleaseCommand>(releaseTopic, { timeoutSeconds: 0 });
      if (!m) return;
      if (m.command === "cancel") this.cancelled ??= m;
    }
  }

  /**
   * Waits until `until` (epoch ms, fixed by the caller in a checkpointed step, so a resumed wait lasts
   * only what remains; null: no end) for a cancel, or for `accept` (a promote or an approve of `stage`).
   */
  async wait(until: number | null, stage: number, accept: ReleaseCommand["command"] | undefined): Promise<InboxOutcome> {
    for (;;) {
      if (this.cancelled) return { ended: "command", message: this.cancelled };
      const now = await DBOS.now();
      if (until !== null && now >= until) return { ended: "timeout" };
      const waitMs = Math.min(until === null ? maxWaitMs : until - now, maxWaitMs);
      const m = await this.waits.during(DBOS.workflowID, () =>
        DBOS.recv<ReleaseCommand>(releaseTopic, { timeoutSeconds: waitMs / 1000, pollingIntervalMs: commandPollMs }),
      );
      if (!m) continue;
      if (m.command === "cancel") {
        this.cancelled ??= m;
        continue;
      }
      if (m.command === accept && m.stage === stage) return { ended: "command", message: m };
      // Sent for another wait (the server checks the stage, but a command may cross a transition): ignored.
    }
  }
}
