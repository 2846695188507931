/**
 * Issue 31, item 4: `manent-server serve` from spawn to listening, as the tests' startServer meets
 * it (every server-based test file pays it at least once per server), on one database that is
 * already migrated. With --ref COMMIT, that commit's server and this checkout's alternate run by
 * run in one process, so both see the same machine load; medians and minimums in milliseconds.
 *
 * Run: node --import tsx bench/server-start.ts [runs] [--ref COMMIT] [--json]
 */
import { parseArgs } from "node:util";
import { startServer, serverBin } from "../test/support/server-process.js";
import { TestPostgres } from "../test/support/postgres.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { checkoutRef } from "./support/ref-checkout.js";

const { values: opts, positionals } = parseArgs({
  options: { ref: { type: "string" }, json: { type: "boolean", default: false } },
  allowPositionals: true,
});
const runs = Number(positionals[0] ?? 6);

const ref = opts.ref ? await checkoutRef(opts.ref) : undefined;
const pg = await TestPostgres.start();
try {
  const ws = await createWorkspace();
  const config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
  const bins: Record<string, string> = { ...(ref && { [opts.ref!]: ref.bin }), this: serverBin };
  // The first start of each migrates the database and warms the file cache: not counted.
  for (const bin of Object.values(bins)) await (await startServer(config, { cwd: ws.dir, bin })).stop();
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(bins).map((k) => [k, []]));
  for (let i = 0; i < runs; i++) {
    for (const [name, bin] of Object.entries(bins)) {
      const t0 = performance.now();
      const server = await startServer(config, { cwd: ws.dir, bin });
      times[name]!.push(performance.now() - t0);
      await server.stop();
    }
  }
  const figures = Object.fromEntries(
    Object.entries(times).map(([name, t]) => {
      const sorted = [...t].sort((a, b) => a - b);
      return [name, { median: Math.round(sorted[Math.floor(sorted.length / 2)]!), min: Math.round(sorted[0]!) }];
    }),
  );
  for (const [name, f] of Object.entries(figures))
    console.log(`${name.padEnd(12)} spawn → listening: median ${f.median} ms, min ${f.min} ms`);
  if (opts.json) console.log(JSON.stringify({ runs, figures }));
} finally {
  await pg.stop();
  await ref?.remove();
}
