import type pg from "pg";

/**
 * The connected database's commits (pg_stat_database's `xact_commit`: every backend's, read-only
 * ones and LISTENers' notification reads included) and sessions opened, as its backends last
 * reported them (each at most once a second, and when it goes idle).
 */
export async function databaseCounters(client: pg.ClientBase): Promise<{ commits: number; sessions: number }> {
  const r = await client.query<{ c: string; s: string }>(
    "select xact_commit::text as c, sessions::text as s from pg_stat_database where datname = current_database()",
  );
  return { commits: Number(r.rows[0]!.c), sessions: Number(r.rows[0]!.s) };
}
