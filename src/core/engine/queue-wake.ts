import { AsyncLocalStorage } from "node:async_hooks";
import { getExecutor } from "@dbos-inc/dbos-sdk/internal/dbos";
import { wfQueueRunner } from "@dbos-inc/dbos-sdk/internal/wfqueue";
import type { Logger } from "../contract/index.js";

type Poll = (exec: unknown, queue: { name: string }) => Promise<boolean>;

/** The parts of DBOS's queue runner used here; they are internal to DBOS, so each is checked before use. */
interface RunnerInternals {
  states?: Map<string, { queue: { name: string } }>;
  ensureState?: (queue: { name: string }, now: number) => void;
  pollQueue?: Poll;
  isRunning?: boolean;
}

type RecordOutcome = (workflowId: string, status: { queueName?: string }, ...rest: unknown[]) => Promise<unknown>;
/** Where DBOS records a workflow's end (its system database, one per launch). */
interface OutcomeRecorder {
  recordWorkflowOutput?: RecordOutcome;
  recordWorkflowError?: RecordOutcome;
}

const runner = wfQueueRunner as unknown as RunnerInternals;
/*
 * DBOS's queue runner is one per process, so the chain of its polls is too: installed once, for
 * every engine this process starts.
 */
let dbosPoll: Poll | undefined;
/** Per queue: the last poll running or waiting (the runner's or a wake's); the next one chains on it. */
const tails = new Map<string, Promise<unknown>>();
/** Per queue: a wake poll waiting to start, which later wakes join. */
const pending = new Map<string, Promise<void>>();
/**
 * Per queue: this server's own worker concurrency. DBOS keeps a queue's settings in one row of its
 * queues table that every server's registration overwrites and every server re-reads, so without
 * this each server would claim by the concurrency of whichever server registered last.
 */
const ownConcurrency = new Map<string, number>();

/** The queue as DBOS's poll reads it, with this server's worker concurrency in place of the shared row's. */
function ownLimits<Q extends { name: string; workerConcurrency?: number }>(queue: Q): Q {
  const limit = ownConcurrency.get(queue.name);
  if (limit === undefined || queue.workerConcurrency === limit) return queue;
  return Object.assign(Object.create(Object.getPrototypeOf(queue) as object) as Q, queue, { workerConcurrency: limit });
}

/**
 * Starts queued workflows as soon as they are queued, or as soon as the deploy ahead of them in
 * their partition ends, instead of at the queue's next poll (DBOS polls each queue on a timer,
 * every second here).
 *
 * A wake is one poll of the queue by DBOS's own code (`pollQueue`): the same claim in Postgres,
 * so a partition still runs one deploy at a time across the fleet and the queue's order is kept.
 * Wake polls and the runner's own polls of a queue run one after another, never together, so the
 * worker's concurrency (counted in memory before each claim) is never exceeded. Wakes that arrive
 * while one is waiting are merged into it. When DBOS's internals are not as expected, a wake does
 * nothing and the queue's timer starts the workflow as before.
 */
export class QueueWake {
  private readonly available: boolean;
  /** Queues registered by this engine, polled by a wake before DBOS's runner knows them (when `ensureState` is not there to tell it). */
  private readonly registered = new Map<string, { name: string }>();

  constructor(private readonly logger: Logger) {
    if (!dbosPoll && typeof runner.pollQueue === "function" && runner.states instanceof Map) {
      const original = runner.pollQueue;
      dbosPoll = (exec, queue) => original.call(wfQueueRunner, exec, queue);
      // The runner's own polls go through the same per-queue chain as the wakes.
      runner.pollQueue = (exec, queue) => serialized(queue.name, () => dbosPoll!(exec, ownLimits(queue)));
    }
    this.available = dbosPoll !== undefined;
    if (!this.available)
      logger.warn("DBOS's queue runner is not the expected one: queued deploys start at the queue's next poll", {
        component: "queue-wake",
      });
  }

  /**
   * Wakes a queue whenever a workflow of it ends, so the deploy queued behind it in its partition
   * starts at once: the end is recorded (the partition freed) before the wake polls. For the DBOS
   * launched in this process; called after each launch.
   */
  wakeOnEnd(queueNames: readonly string[]): void {
    if (!this.available) return;
    let recorder: OutcomeRecorder;
    try {
      recorder = getExecutor().systemDatabase as unknown as OutcomeRecorder;
    } catch {
      return;
    }
    for (const method of ["recordWorkflowOutput", "recordWorkflowError"] as const) {
      const record = recorder[method];
      if (typeof record !== "function") continue;
      recorder[method] = async (workflowId, status, ...rest) => {
        const out = await record.call(recorder, workflowId, status, ...rest);
        const queue = status?.queueName;
        if (queue !== undefined && queueNames.includes(queue)) void this.wake(queue);
        return out;
      };
    }
  }

  /**
   * A queue DBOS.registerQueue returned: wakes can poll it before the runner's first look at the
   * queues table, and every poll of it claims by this server's `workerConcurrency`, whatever
   * another server of the fleet registered since.
   */
  register(queue: { name: string }, workerConcurrency: number): void {
    this.registered.set(queue.name, queue);
    ownConcurrency.set(queue.name, workerConcurrency);
    // The runner's timer polls it from now on, not from its next look at the queues table (which
    // dbos-idle-loops.ts makes rare).
    if (this.available && typeof runner.ensureState === "function" && !runner.states?.has(queue.name))
      runner.ensureState.call(wfQueueRunner, queue, Date.now());
  }

  /**
   * The async context the workflows a wake dispatches run in: the engine's own, not that of the
   * request that woke the queue, so their log lines do not name a request they do not belong to.
   */
  private readonly outsideRequests = AsyncLocalStorage.snapshot();

  /** Polls the queue now (or right after the poll in progress); resolves when that poll has dispatched what it claimed. */
  wake(queueName: string): Promise<void> {
    return this.outsideRequests(() => this.wakeHere(queueName));
  }

  private wakeHere(queueName: string): Promise<void> {
    if (!this.available || runner.isRunning === false) return Promise.resolve();
    const waiting = pending.get(queueName);
    if (waiting) return waiting;
    const poll = serialized(queueName, async () => {
      pending.delete(queueName);
      const queue = runner.states?.get(queueName)?.queue ?? this.registered.get(queueName);
      // Not after DBOS stopped its runner (a shutdown): what it would claim could not run.
      return queue && runner.isRunning !== false ? dbosPoll!(getExecutor(), ownLimits(queue)) : false;
    }).then(
      () => undefined,
      (err: unknown) =>
        this.logger.warn("queue wake failed; the queue's next poll starts the workflow", { queue: queueName, error: String(err) }),
    );
    pending.set(queueName, poll);
    return poll;
  }
}

function serialized<T>(queueName: string, fn: () => Promise<T>): Promise<T> {
  const run = (tails.get(queueName) ?? Promise.resolve()).then(fn);
  const tail = run.catch(() => undefined);
  tails.set(queueName, tail);
  void tail.then(() => {
    if (tails.get(queueName) === tail) tails.delete(queueName);
  });
  return run;
}
