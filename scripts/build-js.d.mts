// Types of scripts/build-js.mjs, for the TypeScript that imports it (test/support/server-process.ts).
/** True when dist/ was never built or a file under src/ changed (or was added) since the last build. */
export function distIsStale(): boolean;
/** Compiles src/ into dist/; returns how many files were (re)written. */
export function buildDist(): Promise<number>;
