import type pg from "pg";
import type { Statement } from "./database-pool.js";

/** A write held back to be committed with the next statement of its deploy (see {@link HeldWrites}). */
export interface HeldWrite {
  sql: string;
  params: unknown[];
  /**
   * When the write must change a row: the error its deploy's next statement throws if it changes
   * none. Its SQL then returns a row for each row it changes (`returning`).
   */
  lost?: () => Error;
  /** Called once the write is committed. */
  committed?: () => void;
}

/**
 * How the writes held for a deploy are committed: the held ones first, then the statement (if
 * any), in one transaction sent at once (`pipelinedTransaction`); the first error is thrown as
 * `onError` returns it.
 */
export type Transactor = (statements: Statement[], onError: (index: number, err: unknown) => unknown) => Promise<pg.QueryResult[]>;

/** The SQLSTATE of a held write that changed no row (see {@link heldWriteStatements}). */
const unappliedCode = "MN001";

/**
 * A held write that must change a row is checked in the database, so that the transaction it goes
 * in (sent with its COMMIT, in one round trip) is rolled back when it changed none.
 */
export const heldWriteStatements = [
  `create or replace function manent.held_write_applied(changed bigint) returns bigint language plpgsql as $$
   begin
     if changed = 0 then
       raise exception 'a held write changed no row' using errcode = '${unappliedCode}';
     end if;
     return changed;
   end $$`,
];

interface Held {
  writes: HeldWrite[];
  timer: NodeJS.Timeout;
}

/**
 * Writes of a deploy's workflow that need not be committed on their own (a succeeded step's end,
 * see `WriteHold`). Each commit is a WAL flush, and a deploy's steps follow one another within
 * milliseconds, so such a write waits for the deploy's next statement (the next step's start, a
 * gate) and goes with it in one transaction, or after {@link maxHoldMs} on its own if none comes.
 *
 * What a crash loses is what it lost before, a little later: a step whose end was not committed
 * runs again (as when the crash came just before its end was written), and the next step has not
 * started, since its start is the statement the end goes with. Order is kept: the held writes go
 * first, in the order they were held, so the events their triggers write keep theirs.
 */
export class HeldWrites {
  private readonly held = new Map<string, Held>();
  /** A write a timer's commit found lost (it changed no row): thrown by the deploy's next statement. */
  private readonly lost = new Map<string, Error>();

  constructor(
    private readonly pool: Pick<pg.Pool, "query">,
    private readonly transaction: Transactor,
    private readonly onError: (deployId: string, err: unknown) => void,
    private readonly maxHoldMs = 50,
  ) {}

  hold(deployId: string, write: HeldWrite): void {
    const h = this.held.get(deployId);
    if (h) {
      h.writes.push(write);
      return;
    }
    const timer = setTimeout(() => void this.flush(deployId), this.maxHoldMs);
    this.held.set(deployId, { writes: [write], timer });
  }

  /** Runs a statement of the deploy, after its held writes and in the same transaction. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    deployId: string,
    sql: string,
    params: unknown[],
  ): Promise<pg.QueryResult<R>> {
    this.throwIfLost(deployId);
    const writes = this.take(deployId);
    if (!writes) return this.pool.query<R>(sql, params);
    try {
      return (await this.commit(writes, { sql, params })) as pg.QueryResult<R>;
    } catch (err) {
      if (err instanceof LostWrite) throw err.error;
      // The statement or a held write failed: each on its own, so each error is its own.
      await this.commitAlone(deployId, writes, true);
      return this.pool.query<R>(sql, params);
    }
  }

  /** Commits what is held for `deployId` (every deploy when absent) now. */
  async flush(deployId?: string): Promise<void> {
    const ids = deployId === undefined ? [...this.held.keys()] : [deployId];
    await Promise.all(
      ids.map(async (id) => {
        const writes = this.take(id);
        if (writes) await this.commitAlone(id, writes, false);
      }),
    );
  }

  /**
   * Commits held writes without a statement. A lost write is thrown (`throwLost`) or kept for the
   * deploy's next statement to throw; another failure (the transaction already waited out a
   * database that was away) is reported, and the writes are dropped: a step whose end is dropped
   * runs again if its workflow is recovered.
   */
  private async commitAlone(deployId: string, writes: HeldWrite[], throwLost: boolean): Promise<void> {
    try {
      await this.commit(writes);
    } catch (err) {
      if (!(err instanceof LostWrite)) return this.onError(deployId, err);
      if (throwLost) throw err.error;
      this.lost.set(deployId, err.error);
    }
  }

  private async commit(writes: HeldWrite[], statement?: Statement): Promise<pg.QueryResult | undefined> {
    const statements = writes.map(({ sql, params, lost }) => ({
      sql: lost ? `with applied as (${sql}) select manent.held_write_applied(count(*)) from applied` : sql,
      params,
    }));
    const results = await this.transaction(statement ? [...statements, statement] : statements, (index, err) => {
      const write = writes[index];
      return write?.lost && (err as { code?: unknown }).code === unappliedCode ? new LostWrite(write.lost()) : err;
    });
    for (const w of writes) w.committed?.();
    return statement ? results[results.length - 1] : undefined;
  }

  private take(deployId: string): HeldWrite[] | undefined {
    const h = this.held.get(deployId);
    if (!h) return undefined;
    clearTimeout(h.timer);
    this.held.delete(deployId);
    return h.writes;
  }

  private throwIfLost(deployId: string): void {
    const err = this.lost.get(deployId);
    if (!err) return;
    this.lost.delete(deployId);
    throw err;
  }
}

/** A held write that changed no row: rolls its transaction back, carrying the error its deploy's next statement throws. */
class LostWrite extends Error {
  constructor(readonly error: Error) {
    super(error.message);
  }
}
