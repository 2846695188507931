import { createHash } from "node:crypto";
import pg from "pg";

/**
 * Every error manent's own database pools and their connections rejected with, kept by identity:
 * what lets the health check tell the database's failures from anything else that carries a
 * connection-like code (a client's socket cut mid-upload is an `ECONNRESET` too).
 */
const databaseErrors = new WeakSet<object>();

/** Whether `err` is, itself, an error a pool made by {@link databasePool} or one of its connections raised. */
export function raisedByDatabasePool(err: unknown): boolean {
  return typeof err === "object" && err !== null && databaseErrors.has(err);
}

function mark(err: unknown): unknown {
  if (typeof err === "object" && err !== null) databaseErrors.add(err);
  return err;
}

type Fn = (...args: unknown[]) => unknown;

/**
 * Most of Postgres's time on manent's statements went to parsing and planning them again at each
 * call (pg sends a query with parameters as an unnamed statement): the step writes, the deploy's
 * start and end, the hub's read are large statements run a few times per deploy. A pool's
 * statements with parameters are therefore sent as named prepared statements, parsed once per
 * connection, whose plan Postgres may keep (a generic plan after five runs). At most
 * `maxNamedStatements` texts get a name, so that text built at run time cannot fill the
 * connections' memory; later ones go unnamed as before.
 */
const maxNamedStatements = 256;

/** The names a pool gives its statements' texts. */
class StatementNames {
  private readonly names = new Map<string, string>();
  private generation = 0;

  /** The query config to send for `text` with `values`: named unless the table of names is full. */
  config(text: string, values: unknown[]): pg.QueryConfig | undefined {
    let name = this.names.get(text);
    if (name === undefined) {
      if (this.names.size >= maxNamedStatements) return undefined;
      name = `manent_${createHash("sha256").update(text).digest("hex").slice(0, 24)}_${this.generation}`;
      this.names.set(text, name);
    }
    return { name, text, values };
  }

  /**
   * A prepared statement whose result's columns changed under it (a newer server's migration
   * during a rolling upgrade) fails on every connection that prepared it: its text gets a new
   * name, prepared afresh by the next call.
   */
  stale(text: string): void {
    this.generation++;
    this.names.delete(text);
  }
}

/** Postgres's answer to a prepared statement whose result's columns changed since it was prepared. */
function isStalePlan(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === "0A000" && typeof e.message === "string" && e.message.includes("cached plan must not change result type");
}

/**
 * `query(text, values)` as a named statement (see {@link StatementNames}); any other call as it
 * is. A statement found stale is sent once more, unnamed, when it ran on its own: on a client
 * the pool lent (`onLentClient`) it may be in a transaction, which the error has aborted, so the
 * error goes to the caller, whose retry gets the new name.
 */
function namedQuery(fn: Fn, self: object, args: unknown[], names: StatementNames, onLentClient: boolean): unknown {
  const [text, values, ...rest] = args;
  if (typeof text !== "string" || !Array.isArray(values) || values.length === 0 || rest.length > 0) return fn.apply(self, args);
  const config = names.config(text, values);
  if (!config) return fn.apply(self, args);
  return (fn.apply(self, [config]) as Promise<unknown>).catch((err: unknown) => {
    if (!isStalePlan(err)) throw err;
    names.stale(text);
    if (onLentClient) throw err;
    return fn.apply(self, [text, values]);
  });
}

/** Calls `fn`, marking what it rejects with (promise form) or passes to its callback (callback form). */
function marking(fn: Fn, self: object, args: unknown[], wrapResult?: (result: unknown) => unknown): unknown {
  const last = args[args.length - 1];
  if (typeof last === "function") {
    const callback = last as Fn;
    const withMark = (err: unknown, value?: unknown, ...rest: unknown[]): unknown =>
      callback(err ? mark(err) : err, wrapResult && value !== undefined ? wrapResult(value) : value, ...rest);
    return fn.apply(self, [...args.slice(0, -1), withMark]);
  }
  const result = fn.apply(self, args);
  if (result instanceof Promise) {
    return result.then(
      (value: unknown) => (wrapResult ? wrapResult(value) : value),
      (err: unknown) => {
        throw mark(err);
      },
    );
  }
  return result; // a Submittable (cursor, stream): it reports its errors as events
}

/** Methods called on the target itself, so pg's own `this` (and its private state) is untouched. */
function bound(target: object, prop: string | symbol): unknown {
  const value = Reflect.get(target, prop, target) as unknown;
  return typeof value === "function" ? (value as Fn).bind(target) : value;
}

function trackClient(client: pg.PoolClient, names: StatementNames): pg.PoolClient {
  return new Proxy(client, {
    get(target, prop) {
      if (prop === "query")
        return (...args: unknown[]) => marking((...a: unknown[]) => namedQuery(target.query as Fn, target, a, names, true), target, args);
      if (prop === "connect") return (...args: unknown[]) => marking(target[prop] as Fn, target, args);
      return bound(target, prop);
    },
  });
}

/**
 * A pg pool whose errors (of `query`, `connect`, and the queries of the clients it lends) are
 * known to come from the database connection: see {@link raisedByDatabasePool}. `onConnect` is
 * given each new connection before anything runs on it.
 */
export function databasePool(config: pg.PoolConfig, opts: { onConnect?: (client: pg.PoolClient) => void } = {}): pg.Pool {
  // Pipelining changes nothing for a query awaited before the next is sent; it lets
  // pipelinedTransaction send its statements at once.
  const pool = new pg.Pool({ pipeline: true, ...config });
  if (opts.onConnect) pool.on("connect", opts.onConnect);
  // pg listens for a client's errors only while it sits idle in the pool (and reports them as the
  // pool's 'error'). One lent out between two queries (a transaction's code running, a release on
  // its way) whose connection drops emits an 'error' nobody handles, an uncaught exception. Each
  // client gets a listener for its life: the query in flight fails with the error anyway, and the
  // next one on that client fails too, where its caller handles it.
  // pg's end() resolves once it has told each client to end, not once their connections closed;
  // until then pg still reports what the database sends them (a shutdown's termination) as the
  // pool's 'error'. `end()` here waits for every connection to close.
  const open = new Set<pg.PoolClient>();
  pool.on("connect", (client) => {
    client.on("error", ignoreConnectionError);
    open.add(client);
    client.once("end", () => open.delete(client));
  });
  const endClosed = async (): Promise<void> => {
    await pool.end();
    await Promise.all([...open].map((client) => new Promise((resolve) => client.once("end", resolve))));
  };
  const names = new StatementNames();
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === "end") return (...args: unknown[]) => (args.length === 0 ? endClosed() : (target.end as Fn).apply(target, args));
      if (prop === "query")
        return (...args: unknown[]) => marking((...a: unknown[]) => namedQuery(target.query as Fn, target, a, names, false), target, args);
      if (prop === "connect")
        return (...args: unknown[]) => marking(target.connect as Fn, target, args, (c) => trackClient(c as pg.PoolClient, names));
      return bound(target, prop);
    },
  });
}

function ignoreConnectionError(): void {}

/** A statement and its parameters. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * Runs `statements` in one transaction whose BEGIN, statements and COMMIT are written together:
 * on a client that pipelines (every client of {@link databasePool}) that is one write and one
 * round trip where it took one per statement, and Postgres runs them in order as ever. When one
 * fails, the ones after it fail too (the transaction is aborted) and the COMMIT rolls back; the
 * first failure is thrown, as `onError(index, error)` returns it (the error itself by default).
 * Returns each statement's result.
 */
export async function pipelinedTransaction(
  pool: pg.Pool,
  statements: readonly Statement[],
  onError: (index: number, err: unknown) => unknown = (_, err) => err,
): Promise<pg.QueryResult[]> {
  const client = await pool.connect();
  let broken = false;
  try {
    // pg writes each query on its own: corked, they leave in one write.
    const socket = (client as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
    socket?.cork?.();
    let sent: Promise<pg.QueryResult>[];
    try {
      sent = [client.query("begin"), ...statements.map((s) => client.query(s.sql, s.params)), client.query("commit")];
    } finally {
      socket?.uncork?.();
    }
    const settled = await Promise.allSettled(sent);
    const failed = settled.findIndex((s) => s.status === "rejected");
    if (failed < 0) return settled.slice(1, -1).map((s) => (s as PromiseFulfilledResult<pg.QueryResult>).value);
    // A COMMIT that answered has ended the transaction (rolled back); otherwise it is ended here.
    if (settled[settled.length - 1]!.status === "rejected")
      await client.query("rollback").catch(() => {
        broken = true;
      });
    const err = (settled[failed] as PromiseRejectedResult).reason;
    throw failed === 0 || failed === settled.length - 1 ? err : onError(failed - 1, err);
  } finally {
    client.release(broken);
  }
}

/** Runs `fn` in one transaction on one client; a rollback that fails drops the connection. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query("begin");
    const out = await fn(client);
    await client.query("commit");
    return out;
  } catch (err) {
    await client.query("rollback").catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
