import { DBOS } from "@dbos-inc/dbos-sdk";
import { commandTopic, type CommandMessage } from "./rollout-commands.js";
import type { DurableWaits } from "../engine/durable-waits.js";

/** How a wait ended: its deadline, a command, or a background check that failed (`reason` names it and its value). */
export type WaitOutcome = { ended: "timeout" } | { ended: "command"; message: CommandMessage } | { ended: "background"; reason: string };

/**
 * Measured while the rollout waits (see background-analysis.ts): a wait wakes when a measurement
 * is due, takes it (checkpointed) and ends when a check failed.
 */
export interface BackgroundTicker {
  /** Epoch ms when the next measurement is due; null while nothing runs. */
  due(): number | null;
  /** Takes the measurements due at `now`; resolves to why the rollout must stop when a check failed. */
  tick(now: number): Promise<string | undefined>;
}

/** Upper bound of one durable wait: a wait without an end is a series of these. */
const maxWaitMs = 24 * 3_600_000;
/**
 * How often a wait looks for a command itself. A command is normally seen at once (a Postgres
 * NOTIFY wakes the wait); this bounds the delay when that notification is lost (DBOS's default,
 * 10 s, made a promote take effect 10 s late). One indexed read a second per waiting rollout.
 */
const commandPollMs = 1000;

/**
 * The operator commands a rollout workflow has read. Reads go through DBOS.recv, so they are
 * checkpointed: a resumed workflow sees the same commands at the same points. An abort and a full
 * promote are remembered until acted on; an approve or a plain promote only ends the wait it was
 * sent to.
 */
export class CommandInbox {
  /** The abort received, if any: the rollout reverts at its next transition. */
  aborted: CommandMessage | undefined;
  /** The `promote --full` received, if any: every remaining step is skipped. */
  promotedFull: CommandMessage | undefined;

  constructor(
    private readonly waits?: DurableWaits,
    /** The background analysis, measured during every wait of this inbox. */
    readonly background?: BackgroundTicker,
  ) {}

  /** Takes the background measurements due now (between two steps); resolves to a failed check's reason. */
  async checkBackground(): Promise<string | undefined> {
    if (!this.background || this.background.due() === null) return undefined;
    return this.background.tick(await DBOS.now());
  }

  /** Reads, without waiting, the commands sent since the last look. */
  async poll(): Promise<void> {
    for (;;) {
      const m = await DBOS.recv<CommandMessage>(commandTopic, { timeoutSeconds: 0 });
      if (!m) return;
      this.note(m);
    }
  }

  /**
   * Waits for a command that ends a pause (promote) or an approval (approve or promote), an abort,
   * a `promote --full`, or the deadline (an analysis waits only for the last three) (epoch ms; null
   * for none). The deadline is fixed by the caller in a checkpointed step, so after a restart the
   * wait lasts only what remains of it. With `fullEnds` false (an approval that names its
   * approvers), a `promote --full` is remembered but does not end the wait.
   */
  async wait(
    kind: "pause" | "approval" | "analysis" | "webhook",
    until: number | null,
    step?: string,
    fullEnds = true,
  ): Promise<WaitOutcome> {
    for (;;) {
      if (this.aborted) return { ended: "command", message: this.aborted };
      if (this.promotedFull && fullEnds) return { ended: "command", message: this.promotedFull };
      const now = await DBOS.now();
      if (this.background && this.background.due() !== null) {
        const failed = await this.background.tick(now);
        if (failed !== undefined) return { ended: "background", reason: failed };
      }
      if (until !== null && now >= until) return { ended: "timeout" };
      // Woken for the next background measurement, too (its time comes from checkpointed steps, so a replay wakes alike).
      const due = this.background?.due() ?? null;
      const end = due === null ? until : until === null ? due : Math.min(until, due);
      const waitMs = Math.max(0, Math.min(end === null ? maxWaitMs : end - now, maxWaitMs));
      const recv = () => DBOS.recv<CommandMessage>(commandTopic, { timeoutSeconds: waitMs / 1000, pollingIntervalMs: commandPollMs });
      const m = await (this.waits ? this.waits.during(DBOS.workflowID, recv) : recv());
      if (!m) continue;
      this.note(m);
      if (m.command === "abort" || (m.command === "promote" && m.full && fullEnds)) return { ended: "command", message: m };
      if (m.command === "promote" && m.full) continue;
      const forThisWait = m.step === undefined || m.step === step;
      if (forThisWait && ((m.command === "promote" && kind !== "analysis") || (m.command === "approve" && kind === "approval"))) {
        return { ended: "command", message: m };
      }
      // An approve during a pause, a plain promote during an analysis, one sent to an earlier wait: not for this one.
    }
  }

  private note(m: CommandMessage): void {
    if (m.command === "abort") this.aborted ??= m;
    if (m.command === "promote" && m.full) this.promotedFull ??= m;
  }
}
