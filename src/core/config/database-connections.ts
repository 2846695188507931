/**
 * How a server's `dbos.connections` is shared: a third to the workflow engine (DBOS's own pool: its
 * checkpoints and queue polls), the rest to manent's records, API reads and event hub. 30 gives
 * the 10 and 20 the two pools had before the setting existed.
 */
export function connectionShares(connections: number): { records: number; engine: number } {
  const engine = Math.max(minEngineConnections, Math.round(connections / 3));
  return { engine, records: connections - engine };
}

/** DBOS keeps about half of its pool for its queue polls: five leave its checkpoints two or three. */
const minEngineConnections = 5;
/** The least `dbos.connections` accepts: the engine's minimum and five for manent's own statements. */
export const minConnections = minEngineConnections + 5;
export const defaultConnections = 30;
