import type { Logger } from "../contract/index.js";
import type { NotificationChannel, NotificationsConfig } from "../config/notifications-config.js";
import { matchesPattern } from "../identity/index.js";
import { Code, ManentError } from "../errors.js";
import { notificationOf, type NotificationFacts, type SourceEvent } from "./notification-source.js";
import { renderMessage, type RenderedMessage } from "./notification-templates.js";

/** One notification to one channel, as the outbox keeps it. */
export interface PlannedDelivery {
  /** Unique with `channel`: the same happening read twice is one delivery. */
  key: string;
  channel: string;
  facts: NotificationFacts;
}

export interface Delivery extends PlannedDelivery {
  id: number;
  /** Attempts so far, the one just claimed included. */
  attempts: number;
}

export type DeliveryOutcome =
  { status: "delivered" } | { status: "pending"; error: string; retryInMs: number } | { status: "failed"; error: string };

/**
 * The outbox of notifications (src/storage/pg-notification-store.ts). Deliveries are planned from
 * the event log in the transaction that moves the outbox's cursor over it, so an event is planned
 * once, and a server killed at any point loses none: what it had claimed is claimed again when its
 * lease ends.
 */
export interface NotificationStore {
  /** Plans the deliveries of the events after the cursor (up to the log's horizon, at most `limit`); returns how many were read. */
  pump(plan: (e: SourceEvent) => PlannedDelivery[], limit: number): Promise<number>;
  /** Takes up to `limit` due deliveries for `leaseMs`, counting an attempt of each. */
  claim(limit: number, leaseMs: number): Promise<Delivery[]>;
  /** Records an attempt's outcome, and a delivered or failed one on the event log (`notification.delivered`, `notification.failed`). */
  settle(d: Delivery, type: NotificationChannel["type"] | "unknown", outcome: DeliveryOutcome): Promise<void>;
  /** Milliseconds until the next pending delivery is due (or its lease ends); undefined when none is pending. */
  nextDueMs(): Promise<number | undefined>;
  /** Deletes the rows of deliveries that ended more than `olderThanMs` ago (their events keep the record). */
  prune(olderThanMs: number): Promise<void>;
}

/**
 * Sends one message to one channel (src/net/notification-sender.ts): throws a ManentError whose
 * message never holds the channel's secrets; `unavailable`, `deadline_exceeded` and
 * `resource_exhausted` may pass on another attempt, every other code is final.
 */
export interface NotificationSender {
  send(name: string, channel: NotificationChannel, message: RenderedMessage, facts: NotificationFacts, signal: AbortSignal): Promise<void>;
}

const pageSize = 500;
const claimSize = 8;
/** Looked again at least this often: another server's lease may end, or its pump may have run while this one slept. */
const idleMs = 30_000;
const retryable = new Set<Code>([Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted]);
/** An ended delivery's row is kept this long (the key that makes a replayed event one notification), then deleted. */
const keepEndedMs = 7 * 86_400_000;
const pruneEveryMs = 3_600_000;
/** Reads of the log at most this often: a deploy writes its events in bursts, and a busy server's wakes are many. */
const minPumpGapMs = 250;

/**
 * Turns the event log's deploy and release events into notifications to the channels the
 * tenants' subscriptions name, and delivers them with retries and exponential backoff. It runs
 * beside the engine, never inside a deploy: a channel that is down or slow delays only its own
 * deliveries, and a deploy never waits for one.
 */
export class Notifier {
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private prunedAt = 0;

  constructor(
    private readonly o: {
      config: NotificationsConfig;
      store: NotificationStore;
      sender: NotificationSender;
      logger: Logger;
    },
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Something was written to the event log, or a delivery may be due: look now. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort(new ManentError(Code.Canceled, "the server is stopping"));
    this.wakeUp?.();
    await this.loop;
  }

  /** The deliveries one event asks for: one per channel of every subscription that matches it. */
  plan(e: SourceEvent): PlannedDelivery[] {
    const n = notificationOf(e);
    if (!n) return [];
    const f = n.facts;
    const environments = f.of === "release" ? f.environment.split(", ") : [f.environment];
    const channels = new Set<string>();
    for (const s of this.o.config.subscriptions) {
      if (!s.of.includes(f.of) || !s.events.includes(f.event)) continue;
      if (!matchesPattern(s.tenant, f.tenant) || !matchesPattern(s.applications, f.application)) continue;
      if (!environments.some((env) => matchesPattern(s.environments, env))) continue;
      for (const c of s.channels) channels.add(c);
    }
    return [...channels].map((channel) => ({ key: n.key, channel, facts: f }));
  }

  private async run(): Promise<void> {
    let pumpedAt = 0;
    while (!this.stopped) {
      const gap = pumpedAt + minPumpGapMs - Date.now();
      if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap).unref());
      pumpedAt = Date.now();
      this.woken = false;
      let sleepMs = idleMs;
      try {
        while ((await this.o.store.pump((e) => this.plan(e), pageSize)) === pageSize && !this.stopped);
        await this.deliverDue();
        if (Date.now() - this.prunedAt > pruneEveryMs) {
          this.prunedAt = Date.now();
          await this.o.store.prune(keepEndedMs);
        }
        sleepMs = Math.min(idleMs, (await this.o.store.nextDueMs()) ?? idleMs);
      } catch (err) {
        // The database away: looked at again later; the outbox keeps everything meanwhile.
        if (!this.stopped) this.o.logger.warn("notifications: cannot read the outbox", { error: ManentError.from(err).message });
      }
      if (this.stopped || this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(sleepMs, 10));
        timer.unref();
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
  }

  private async deliverDue(): Promise<void> {
    // Longer than any attempt can take (each is bounded by its channel's timeout): a lease that ends means the server holding it is gone.
    const lease = Math.max(0, ...Object.values(this.o.config.channels).map((c) => c.timeout)) + 15_000;
    for (;;) {
      if (this.stopped) return;
      const batch = await this.o.store.claim(claimSize, lease);
      if (batch.length === 0) return;
      // One channel hears of one deploy's (or release's) events in their order: a batch that holds
      // its "started" and its "succeeded" sends them one after the other, in the order they were
      // planned (their ids; a claim returns its rows in no order); other channels and other deploys
      // go at the same time.
      const inOrder = new Map<string, Delivery[]>();
      for (const d of [...batch].sort((a, b) => a.id - b.id)) {
        const key = `${d.channel}\0${d.facts.of}\0${d.facts.id}`;
        const deliveries = inOrder.get(key);
        if (deliveries) deliveries.push(d);
        else inOrder.set(key, [d]);
      }
      await Promise.all(
        [...inOrder.values()].map(async (deliveries) => {
          for (const d of deliveries) await this.deliver(d);
        }),
      );
    }
  }

  private async deliver(d: Delivery): Promise<void> {
    const channel = this.o.config.channels[d.channel];
    const fields = { channel: d.channel, event: d.facts.event, [d.facts.of]: d.facts.id, attempts: d.attempts };
    if (!channel) {
      const error = `channel ${d.channel} is no longer configured in notifications.channels`;
      this.o.logger.warn("notification failed", { ...fields, error });
      return this.o.store.settle(d, "unknown", { status: "failed", error });
    }
    let outcome: DeliveryOutcome;
    try {
      await this.o.sender.send(d.channel, channel, renderMessage(channel, d.facts), d.facts, this.abort.signal);
      outcome = { status: "delivered" };
      this.o.logger.info("notification delivered", fields);
    } catch (err) {
      const e = ManentError.from(err);
      // Stopping mid-attempt: the lease ends and the attempt is made again, by this server or another.
      if (this.stopped) return;
      const { max_attempts, retry_interval, max_interval } = this.o.config.delivery;
      if (retryable.has(e.code) && d.attempts < max_attempts) {
        outcome = { status: "pending", error: e.message, retryInMs: Math.min(max_interval, retry_interval * 2 ** (d.attempts - 1)) };
        this.o.logger.warn("notification attempt failed: retried later", { ...fields, error: e.message, retry_in_ms: outcome.retryInMs });
      } else {
        outcome = { status: "failed", error: e.message };
        this.o.logger.warn("notification failed", { ...fields, error: e.message });
      }
    }
    await this.o.store.settle(d, channel.type, outcome);
  }
}
