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

function trackClient(client: pg.PoolClient): pg.PoolClient {
  return new Proxy(client, {
    get(target, prop) {
      if (prop === "query" || prop === "connect") return (...args: unknown[]) => marking(target[prop] as Fn, target, args);
      return bound(target, prop);
    },
  });
}

/**
 * A pg pool whose errors (of `query`, `connect`, and the queries of the clients it lends) are
 * known to come from the database connection: see {@link raisedByDatabasePool}.
 */
export function databasePool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  // pg listens for a client's errors only while it sits idle in the pool (and reports them as the
  // pool's 'error'). One lent out between two queries (a transaction's code running, a release on
  // its way) whose connection drops emits an 'error' nobody handles, an uncaught exception. Each
  // client gets a listener for its life: the query in flight fails with the error anyway, and the
  // next one on that client fails too, where its caller handles it.
  pool.on("connect", (client) => client.on("error", ignoreConnectionError));
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === "query") return (...args: unknown[]) => marking(target.query as Fn, target, args);
      if (prop === "connect")
        return (...args: unknown[]) => marking(target.connect as Fn, target, args, (c) => trackClient(c as pg.PoolClient));
      return bound(target, prop);
    },
  });
}

function ignoreConnectionError(): void {}

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
