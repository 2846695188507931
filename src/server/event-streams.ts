import type { Logger } from "../core/contract/index.js";
import type { DeployEvent } from "../core/engine/deploy-events.js";
import type { EventFilter } from "../storage/pg-event-hub.js";

/** Where a stream's text goes: the HTTP response (written directly, no web stream between). */
export interface StreamSink {
  write(text: string): void;
  end(): void;
  /** Bytes written that the client has not taken yet (the response's buffer); omitted: not known. */
  pending?(): number;
}

/** What the streams need of the event hub (PgEventHub). */
export interface EventSource {
  subscribe(filter: EventFilter, fn: (event: DeployEvent) => void, onClose?: () => void): () => void;
  recentAfter(afterId: number, filter: EventFilter): DeployEvent[] | undefined;
  read(afterId: number, filter: EventFilter, limit: number): Promise<DeployEvent[]>;
  toJson(event: DeployEvent): string;
}

interface OpenStream {
  sink: StreamSink;
  /** The last event id written. */
  last: number;
  /** Events delivered live while the backlog is read from the database; undefined once live. */
  waiting: DeployEvent[] | undefined;
  /** Text not written yet: the events delivered in one tick go out in one write. */
  text: string;
  flushScheduled: boolean;
  /** Keep-alive ticks since the stream's last write. */
  quietTicks: number;
  closed: boolean;
  unsubscribe: () => void;
}

const pageSize = 500;
/** Comment lines that keep idle streams open through proxies: no stream is quiet for longer than this. */
const defaultKeepAliveMs = 15_000;
/**
 * Keep-alive ticks per {@link defaultKeepAliveMs}: a stream gets its comment at the tick that ends
 * its third quiet one, between 2/3 and all of the interval after its last write. (At one tick per
 * interval a stream that wrote just after a tick waited almost two: `curl … | grep -m 2` in
 * docs/operations/notifications.md ended after 30 s where the page says 15.)
 */
const ticksPerKeepAlive = 3;
/**
 * A client that does not read (stalled, or reading on purpose slowly) would make the server buffer
 * every event for it without end: past this its stream is ended, and an EventSource reconnects
 * with Last-Event-ID and gets what it missed from the database, a page at a time.
 */
const defaultMaxPendingBytes = 8 * 1024 * 1024;

/**
 * The open SSE streams of one server. Each event's JSON is made once for all streams, the events
 * delivered to a stream in one tick are written together, and one timer (not one per stream)
 * sends the keep-alive comments of the streams that have been quiet for most of an interval.
 */
export class EventStreams {
  private readonly streams = new Set<OpenStream>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly hub: EventSource,
    private readonly logger: Logger,
    private readonly keepAliveMs = defaultKeepAliveMs,
    private readonly maxPendingBytes = defaultMaxPendingBytes,
  ) {}

  /** How many streams are open. */
  get size(): number {
    return this.streams.size;
  }

  /**
   * Sends the events after `after` that match, then new ones as the hub delivers them, in id order
   * and each once: the subscription starts before the backlog is read, so nothing falls between.
   * A stream resuming from a recent event (a client reconnecting) gets its backlog from the hub's
   * memory, taken in the same tick as the subscription; an older one reads the database. Returns
   * the function that closes the stream (the client went away); the sink is ended when the hub
   * closes or the backlog cannot be read.
   */
  open(sink: StreamSink, filter: EventFilter, after: number): () => void {
    const s: OpenStream = {
      sink,
      last: after,
      waiting: [],
      text: "",
      flushScheduled: false,
      quietTicks: 0,
      closed: false,
      unsubscribe: () => undefined,
    };
    s.unsubscribe = this.hub.subscribe(
      filter,
      (e) => {
        if (s.waiting) s.waiting.push(e);
        else {
          this.append(s, e);
          this.scheduleFlush(s);
        }
      },
      () => this.end(s),
    );
    this.streams.add(s);
    this.timer ??= setInterval(() => this.keepAlive(), this.keepAliveMs / ticksPerKeepAlive).unref();
    const recent = this.hub.recentAfter(after, filter);
    if (recent) {
      for (const e of recent) this.append(s, e);
      s.waiting = undefined;
      this.flush(s);
    } else {
      this.catchUp(s, filter).catch((err: unknown) => {
        this.logger.warn("event stream failed", { error: err instanceof Error ? err.message : String(err) });
        this.end(s);
      });
    }
    return () => this.close(s);
  }

  private async catchUp(s: OpenStream, filter: EventFilter): Promise<void> {
    for (;;) {
      const page = await this.hub.read(s.last, filter, pageSize);
      if (s.closed) return;
      for (const e of page) this.append(s, e);
      this.flush(s);
      if (page.length < pageSize) break;
    }
    for (const e of s.waiting!) this.append(s, e);
    s.waiting = undefined;
    this.flush(s);
  }

  /** Adds an event not sent yet to the stream's text (the format of hono's writeSSE: data, then id). */
  private append(s: OpenStream, e: DeployEvent): void {
    if (e.id <= s.last) return;
    s.text += `data: ${this.hub.toJson(e)}\nid: ${e.id}\n\n`;
    s.last = e.id;
  }

  /** Writes after the hub has handed over everything it read in this tick. */
  private scheduleFlush(s: OpenStream): void {
    if (s.flushScheduled) return;
    s.flushScheduled = true;
    queueMicrotask(() => {
      s.flushScheduled = false;
      this.flush(s);
    });
  }

  private flush(s: OpenStream): void {
    if (s.closed || s.text === "") return;
    const text = s.text;
    s.text = "";
    s.quietTicks = 0;
    s.sink.write(text);
    const pending = s.sink.pending?.() ?? 0;
    if (pending > this.maxPendingBytes) {
      this.logger.warn("event stream ended: its client does not read what it is sent", { pending_bytes: pending });
      this.end(s);
    }
  }

  private keepAlive(): void {
    for (const s of this.streams) {
      if (++s.quietTicks < ticksPerKeepAlive) continue;
      s.sink.write(": keep-alive\n\n");
      s.quietTicks = 0;
    }
  }

  /** The client went away: nothing more is written. */
  private close(s: OpenStream): void {
    if (s.closed) return;
    s.closed = true;
    s.unsubscribe();
    this.streams.delete(s);
    if (this.streams.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** The server ends the stream (the hub closed, or the backlog failed). */
  private end(s: OpenStream): void {
    if (s.closed) return;
    this.close(s);
    s.sink.end();
  }
}
