import pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { Code, ManentError } from "../core/errors.js";
import { raisedByDatabasePool } from "./database-pool.js";

/** SQLSTATE classes of a database that is away or restarting: connection exception, operator intervention, insufficient resources. */
const unavailableClasses = new Set(["08", "53", "57"]);
const unavailableErrnos = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNABORTED",
  "EAI_AGAIN",
]);
const unavailableMessages = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /server closed the connection/i,
  /client has encountered a connection error/i,
  /the database system is (starting up|shutting down|in recovery mode)/i,
  /Client was closed and is not queryable/i,
  /Connection terminated/i,
];

/** Whether one error, by its own code or message (not its causes'), says a connection is down. */
function signalsUnavailable(e: object): boolean {
  const { code, message } = e as { code?: unknown; message?: unknown };
  if (typeof code === "string" && code.length === 5 && code !== "57014" && unavailableClasses.has(code.slice(0, 2))) return true;
  if (typeof code === "string" && unavailableErrnos.has(code)) return true;
  return typeof message === "string" && unavailableMessages.some((m) => m.test(message));
}

function* chain(err: unknown): Generator<object> {
  const seen = new Set<unknown>();
  for (let e: unknown = err; e && typeof e === "object" && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    yield e;
  }
}

/**
 * True when `err` is, or was caused by, an error of the database connection saying the database
 * cannot be reached right now (it is restarting, down, or the connection was cut), as opposed to
 * an error of the query itself: a retry after it comes back can succeed. The origin is checked
 * by identity, never by a code alone: an error some pool of {@link databasePool} raised, or one
 * Postgres itself sent (pg's `DatabaseError`, whichever pool of the process received it). A
 * client's socket cut mid-request carries an `ECONNRESET` too, and is no sign of the database.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    if ((raisedByDatabasePool(e) || e instanceof pg.DatabaseError) && signalsUnavailable(e)) return true;
  }
  return false;
}

/**
 * True when some error of `err`'s chain looks like a lost connection, whatever raised it: for an
 * error of unknown origin (one of DBOS's own pools, an event nobody listened to), never a reason
 * to mark the database away on its own.
 */
export function looksLikeConnectionLoss(err: unknown): boolean {
  for (const e of chain(err)) if (signalsUnavailable(e)) return true;
  return false;
}

export function databaseUnavailable(cause?: unknown): ManentError {
  // The cause stays in the log: its text may carry an internal address.
  return new ManentError(Code.Unavailable, "database unavailable: manent is waiting for it to come back; retry shortly", {
    details: { component: "database" },
    ...(cause !== undefined && { cause }),
  });
}

/**
 * Runs `query`, and while the database is unavailable, runs it again with backoff (0.2 s doubling
 * to 5 s) until it comes back: what a deploy's own writes do, so a database restart pauses deploys
 * instead of failing them. Errors of the query itself are thrown at once.
 */
export async function whileUnavailable<T>(query: () => Promise<T>, logger: Logger, what: string): Promise<T> {
  let backoffMs = 200;
  for (let attempt = 1; ; attempt++) {
    try {
      return await query();
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      if (attempt === 1 || attempt % 10 === 0)
        logger.warn("database unavailable: retrying", { what, attempt, error: (err as Error).message });
      await new Promise((r) => setTimeout(r, backoffMs));
      backoffMs = Math.min(backoffMs * 2, 5000);
    }
  }
}

/**
 * Whether the database answers, checked every second: while it does not, the API answers 503
 * `unavailable` at once instead of waiting on connections, and the change is logged both ways.
 */
export class DatabaseHealth {
  private down: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly logger: Logger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Throws 503 `unavailable` while the database is known to be away. */
  assertAvailable(): void {
    if (this.down !== undefined) throw databaseUnavailable();
  }

  /**
   * Called with a request's error: the database connection's own sign of the database being away
   * is acted on at once; an error of unknown origin that only looks like one gets the database
   * checked now, and it is marked away only if that check fails.
   */
  noticed(err: unknown): void {
    if (isDatabaseUnavailable(err)) this.markDown((err as Error).message);
    else if (looksLikeConnectionLoss(err)) void this.check();
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await this.pool.query("select 1");
      if (this.down !== undefined) {
        this.logger.info("database available again", {});
        this.down = undefined;
      }
    } catch (err) {
      this.markDown((err as Error).message);
    } finally {
      this.checking = false;
    }
  }

  private markDown(reason: string): void {
    if (this.down === undefined) this.logger.error("database unavailable: the API answers 503 until it is back", { error: reason });
    this.down = reason;
  }
}

/**
 * The pool, with every `query` run {@link whileUnavailable}: for the deploy store the workflows
 * use, whose writes are idempotent (every one may run again after a crash) and so safe to repeat
 * when a connection was cut after the server applied them.
 */
export function retryingQueries(pool: pg.Pool, logger: Logger): pg.Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop !== "query") return Reflect.get(target, prop, target) as unknown;
      return (...args: unknown[]) =>
        whileUnavailable(() => (target.query as (...a: unknown[]) => Promise<unknown>)(...args), logger, "deploy store");
    },
  });
}
