import type pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { eventsChannel, eventsWrittenCode, notifyByServer } from "./events-schema.js";

/**
 * How long a server gathers its own event-writing commits before it NOTIFYs for them: the hubs
 * learn of an event up to this much later, and a busy server NOTIFYs at most this often.
 */
export const notifyWindowMs = 25;

/**
 * The NOTIFY for a server's own event-writing commits, one for all those of a window.
 *
 * Each NOTIFY wakes every backend that LISTENs on the database (two per server) and every server's
 * hub. Sent by each event-writing transaction, that was about three a no-op deploy, and at
 * saturation those wakes cost a fleet of three servers more than one server: the same statements
 * took a third more CPU (bench/README, "One NOTIFY per window of a server's commits"). The
 * sessions of the server's pool (see {@link attach}) send it a notice instead (events_notify in
 * events-schema.ts), and it NOTIFYs once at the end of the window that notice opened.
 *
 * The notice comes while the transaction commits, before its commit is over: the window also
 * leaves it time to end. A hub that reads before it has (a flush that waited on the disk longer
 * than the window) finds the horizon held by that transaction's claim and reads again after it,
 * as it does when a server dies between its commit and its NOTIFY (pg-event-hub.ts).
 */
export class EventsNotifier {
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private tellLocal: (() => void) | undefined;
  private readonly onNotice = (notice: { code?: string | undefined }): void => {
    if (notice.code === eventsWrittenCode) this.written();
  };

  /** `query` sends a statement on the server's pool. */
  constructor(
    private readonly query: (sql: string) => Promise<unknown>,
    private readonly logger: Logger,
    private readonly windowMs = notifyWindowMs,
  ) {}

  /**
   * Makes a new connection of the server's pool leave its NOTIFYs to this notifier: sets the
   * session's `manent.notify_by` (the first statement the connection runs) and listens for its
   * notices. For the pool's `connect` event.
   */
  attach(client: pg.PoolClient): void {
    client.on("notice", this.onNotice);
    // A failure here fails the connection's next statement too, whose caller handles it.
    client.query(notifyByServer).catch(() => undefined);
  }

  /**
   * Tells `fn` (the server's own hub) of each commit of the server that wrote events at once: its
   * readers need not wait for the window's NOTIFY.
   */
  alsoTell(fn: () => void): void {
    this.tellLocal = fn;
  }

  /** A commit of this server's wrote events: a NOTIFY at the end of the window, one for all of them. */
  written(): void {
    this.tellLocal?.();
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.notify();
    }, this.windowMs);
  }

  /** Sends the pending NOTIFY now (a server stopping), then sends no more. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.notify();
  }

  private async notify(): Promise<void> {
    try {
      await this.query(`select pg_notify('${eventsChannel}', '')`);
    } catch (err) {
      // The hubs read anyway while something waits (their safety read), and a later window notifies again.
      this.logger.warn("cannot notify the event hubs", { error: String(err) });
    }
  }
}
