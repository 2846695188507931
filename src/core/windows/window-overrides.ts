import { RecordFlagWatch } from "../engine/record-flag-watch.js";
import type { WindowOverride } from "./deploy-windows.js";

/** An override given to a deploy already waiting for its window, as recorded. */
export interface RecordedWindowOverride extends WindowOverride {
  at: string;
}

/**
 * Where overrides of waiting deploys are kept: in the database, so the server running the wait
 * sees one given through another server of the fleet, and a wait resumed after a restart sees it.
 */
export interface WindowOverrideStore {
  /**
   * Records `override` for deploy `id` if it is queued and waiting for a deploy window now, in one
   * statement (a deploy that starts or is cancelled meanwhile is not overridden).
   */
  record(id: string, override: WindowOverride): Promise<"recorded" | "already" | "not_waiting" | "not_found">;
  find(id: string): Promise<RecordedWindowOverride | undefined>;
}

/**
 * Wakes a deploy waiting for its window when an admin overrides it: at once when the override
 * comes through this server, within `pollMs` when it comes through another server of the fleet.
 */
export class WindowOverrideWatch extends RecordFlagWatch {
  constructor(store: WindowOverrideStore, pollMs = 15_000) {
    super(
      // Rare (deploys waiting for a window) and slow (15 s): one read per deploy.
      async (ids) => new Set((await Promise.all(ids.map(async (id) => ((await store.find(id)) ? [id] : [])))).flat()),
      () => undefined,
      pollMs,
    );
  }
}
