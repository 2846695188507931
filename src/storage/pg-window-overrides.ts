import type pg from "pg";
import type { WindowOverride } from "../core/windows/deploy-windows.js";
import type { RecordedWindowOverride, WindowOverrideStore } from "../core/windows/window-overrides.js";

export const windowOverrideStatements = [
  // An admin's override of a deploy already waiting for its window (one per deploy); an override
  // given at submission is in the deploy's request instead.
  `create table if not exists manent.window_overrides (
     deploy_id text primary key references manent.deploys (id) on delete cascade,
     reason text not null,
     overridden_by text not null,
     created_at timestamptz not null default now()
   )`,
];

export class PgWindowOverrides implements WindowOverrideStore {
  constructor(private readonly pool: Pick<pg.Pool, "query">) {}

  async record(id: string, override: WindowOverride): Promise<"recorded" | "already" | "not_waiting" | "not_found"> {
    const r = await this.pool.query<{ found: boolean; recorded: boolean; already: boolean }>(
      `with d as (select id, status = 'queued' and waiting is not null as waiting from manent.deploys where id = $1),
            ins as (insert into manent.window_overrides (deploy_id, reason, overridden_by)
                    select id, $2, $3 from d where waiting
                    on conflict (deploy_id) do nothing returning deploy_id)
       select exists (select 1 from d) as found, exists (select 1 from ins) as recorded,
              exists (select 1 from manent.window_overrides where deploy_id = $1) as already`,
      [id, override.reason, override.by],
    );
    const row = r.rows[0]!;
    return row.recorded ? "recorded" : !row.found ? "not_found" : row.already ? "already" : "not_waiting";
  }

  async find(id: string): Promise<RecordedWindowOverride | undefined> {
    const r = await this.pool.query<{ reason: string; overridden_by: string; created_at: Date }>(
      `select reason, overridden_by, created_at from manent.window_overrides where deploy_id = $1`,
      [id],
    );
    const row = r.rows[0];
    return row && { reason: row.reason, by: row.overridden_by, at: row.created_at.toISOString() };
  }
}
