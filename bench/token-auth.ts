/**
 * What a managed API token costs per request, against a manent.yml token, on a real manent-server
 * with the embedded Postgres: GET /api/v1/whoami in sequence (keep-alive), with each kind of
 * token. A managed token is read from its table at every request (a lookup by the unique index of
 * its sha256), with no cache, so a revoke through any server takes effect on the next request
 * everywhere; this measures what that choice costs.
 * Run: node --import tsx bench/token-auth.ts [requests] [--json]
 */
import { createHash } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { EmbeddedDatabase } from "../src/storage/embedded-postgres.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: "boolean" } } });
const requests = Number(positionals[0] ?? 2000);
const staticToken = "bench-static-token-0123456789";
const ws = await createWorkspace("manent-bench-");
const db = await EmbeddedDatabase.start(await mkdtemp(join(tmpdir(), "manent-bench-pg-")), {
  debug() {},
  info() {},
  warn() {},
  error() {},
});
const config = manentYml(db.url, {
  auth: { tokens: [{ name: "bench", tenant: "*", sha256: createHash("sha256").update(staticToken).digest("hex") }] },
});
const server = await startServer(await ws.write("manent.yml", config), {
  cwd: ws.dir,
  env: { MANENT_LOG_LEVEL: "warn" },
  token: staticToken,
});
const machine = watchMachine();
try {
  const managed = (await server.api.createToken({ name: "bench-managed", role: "viewer", tenant: "*", expires_in: "1d" })).token;
  const measure = async (token: string) => {
    const url = new URL("/api/v1/whoami", server.url);
    const times: number[] = [];
    for (let i = 0; i < requests + 200; i++) {
      const t0 = performance.now();
      const r = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
      if (i >= 200) times.push(performance.now() - t0); // the first 200 warm up
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => Number(times[Math.floor(q * (times.length - 1))]!.toFixed(3));
    return { p50: at(0.5), p99: at(0.99) };
  };
  // Alternated twice, so a noisy neighbour skews both alike.
  const s1 = await measure(staticToken);
  const m1 = await measure(managed);
  const s2 = await measure(staticToken);
  const m2 = await measure(managed);
  const figures = {
    requests,
    static_p50_ms: Math.min(s1.p50, s2.p50),
    static_p99_ms: Math.min(s1.p99, s2.p99),
    managed_p50_ms: Math.min(m1.p50, m2.p50),
    managed_p99_ms: Math.min(m1.p99, m2.p99),
  };
  if (!flags.json)
    console.log(
      `GET /api/v1/whoami, ${requests} requests in sequence:\n` +
        `  manent.yml token: p50 ${figures.static_p50_ms} ms, p99 ${figures.static_p99_ms} ms\n` +
        `  managed token:    p50 ${figures.managed_p50_ms} ms, p99 ${figures.managed_p99_ms} ms (one indexed read per request)`,
    );
  const share = machine.report();
  if (flags.json) console.log(JSON.stringify({ ...figures, ...share }));
} finally {
  await server.stop();
  await db.stop();
}
