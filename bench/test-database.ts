/**
 * Issue 31, item 4: what a server-starting test pays for its fresh database. For each of `runs`
 * rounds, one empty database (`createDatabase({ empty: true })`) and one copied from the migrated
 * template (test/support/migrated-template.ts, made once before the rounds, not counted) are
 * created, and a manent-server is started on each, from spawn to listening: the empty one runs
 * manent's and DBOS's migrations at its start, the copy finds nothing to do. Medians and minimums
 * in milliseconds, alternating the two kinds so both see the same machine load. On the server in
 * TEST_DATABASE_URL when set, else an embedded one of its own.
 *
 * Run: node --import tsx bench/test-database.ts [runs=6] [--json]
 */
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts, positionals } = parseArgs({
  options: { json: { type: "boolean", default: false } },
  allowPositionals: true,
});
const runs = Number(positionals[0] ?? 6);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

console.log(`load average at start: ${load()}`);
const pg = await TestPostgres.start();
const machine = watchMachine();
try {
  const ws = await createWorkspace();
  // Makes the template (once per server) and warms the file cache: not counted.
  const warm = await startServer(await ws.write("warm.yml", manentYml(await pg.createDatabase(), { workdir: "./warm" })), { cwd: ws.dir });
  await warm.stop();
  const kinds = { empty: { empty: true }, template: {} } as const;
  const times = { empty: { create: [] as number[], start: [] as number[] }, template: { create: [] as number[], start: [] as number[] } };
  for (let i = 0; i < runs; i++) {
    for (const [kind, dbOpts] of Object.entries(kinds) as [keyof typeof kinds, (typeof kinds)[keyof typeof kinds]][]) {
      const t0 = performance.now();
      const url = await pg.createDatabase(dbOpts);
      times[kind].create.push(performance.now() - t0);
      const config = await ws.write(`${kind}-${i}.yml`, manentYml(url, { workdir: `./${kind}-${i}` }));
      const t1 = performance.now();
      const server = await startServer(config, { cwd: ws.dir });
      times[kind].start.push(performance.now() - t1);
      await server.stop();
    }
  }
  const stat = (t: number[]): { median: number; min: number } => {
    const sorted = [...t].sort((a, b) => a - b);
    return { median: Math.round(sorted[Math.floor(sorted.length / 2)]!), min: Math.round(sorted[0]!) };
  };
  const figures = Object.fromEntries(
    Object.entries(times).map(([kind, t]) => [kind, { create: stat(t.create), start: stat(t.start) }]),
  ) as Record<keyof typeof kinds, { create: { median: number; min: number }; start: { median: number; min: number } }>;
  for (const [kind, f] of Object.entries(figures)) {
    console.log(
      `${kind.padEnd(9)} create database: median ${f.create.median} ms, min ${f.create.min} ms; first server start: median ${f.start.median} ms, min ${f.start.min} ms`,
    );
  }
  console.log(
    `saved per fresh database (medians): ${figures.empty.create.median + figures.empty.start.median - figures.template.create.median - figures.template.start.median} ms`,
  );
  console.log(`load average at end: ${load()}`);
  const share = machine.report();
  if (opts.json) console.log(JSON.stringify({ ...share, runs, figures }));
} finally {
  await pg.stop();
}
