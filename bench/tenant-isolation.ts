/**
 * Issue 29, item 6: one tenant's abuse against another's reads, each tenant's clients in a process
 * of its own (bench/support/tenant-load.ts). One server on a real Postgres; team-b has 200 deploys
 * in its history and reads its list (GET /api/v1/deploys?limit=20) with --readers clients.
 *  1. baseline: team-b alone for --seconds;
 *  2. under abuse: the same, while team-a cuts uploads on --cutters connections (20 MB announced,
 *     64 KiB sent, dropped) and hammers its quota (1 MiB) with 2 MiB uploads refused 413.
 * Prints team-b's p50/p95/p99 in both and the ratio of the p95s (the aim: at most 2).
 *
 * Run: node --import tsx bench/tenant-isolation.ts [--seconds 20] [--readers 4] [--cutters 6] [--json]
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { parseArgs, promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { ApiClient } from "../src/cli/api-client.js";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const machine = watchMachine();

const { values: opts } = parseArgs({
  options: {
    seconds: { type: "string", default: "20" },
    readers: { type: "string", default: "4" },
    cutters: { type: "string", default: "6" },
    json: { type: "boolean", default: false },
  },
});
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const teamA = `iso-a-${randomBytes(12).toString("hex")}`;
const teamB = `iso-b-${randomBytes(12).toString("hex")}`;
const pgServer = await TestPostgres.start();
const ws = await createWorkspace("manent-bench-iso-");
const config = await ws.write(
  "manent.yml",
  manentYml(await pgServer.createDatabase({ empty: true }), {
    auth: {
      tokens: [
        { name: "team-a", tenant: "team-a", sha256: sha(teamA) },
        { name: "team-b", tenant: "team-b", sha256: sha(teamB) },
      ],
    },
    uploads: { tenant_quotas: { "team-a": "1MiB" } },
  }),
);
await ws.write("envconfig/team-b/shop/shop/prod.yml", { plugin: "noop", targets: [{ host: "shop-1" }] });
const artifact = await ws.write("dist/app.txt", "isolation\n");
const server = await startServer(config, { cwd: ws.dir, env: { MANENT_LOG_LEVEL: "warn" } });
const b = new ApiClient(server.url, teamB);
for (let i = 0; i < 200; i++) {
  const { id } = await b.submit({
    descriptor: { ...descriptor("shop", "prod", artifact, `1.${i}.0`), tenant: "team-b" },
    descriptor_file: "shop.yml",
  });
  await b.deploy(id, 60);
}

const load = fileURLToPath(new URL("./support/tenant-load.ts", import.meta.url));
const run = async (...args: string[]) =>
  JSON.parse((await promisify(execFile)(process.execPath, ["--import", "tsx", load, ...args], { maxBuffer: 1 << 20 })).stdout) as Record<
    string,
    number
  >;
const seconds = opts.seconds;
const baseline = await run("read", server.url, teamB, seconds, opts.readers);
const [abused, abuse] = await Promise.all([
  run("read", server.url, teamB, seconds, opts.readers),
  run("abuse", server.url, teamA, seconds, opts.cutters),
]);
await server.stop();
await pgServer.stop();

const ratio = Math.round((abused.p95! / baseline.p95!) * 100) / 100;
const share = machine.report();
if (opts.json) {
  process.stdout.write(`${JSON.stringify({ ...share, baseline, abused, abuse, p95_ratio: ratio })}\n`);
} else {
  const line = (name: string, r: Record<string, number>) =>
    `${name.padEnd(22)} ${String(r.requests).padStart(6)} reads, ${r.failed} failed, p50 ${r.p50} ms, p95 ${r.p95} ms, p99 ${r.p99} ms, max ${r.max} ms\n`;
  process.stdout.write(line("team-b alone", baseline));
  process.stdout.write(line("team-b, team-a abusing", abused));
  process.stdout.write(`team-a: ${abuse.cuts} cut uploads, ${abuse.refused} uploads refused over its quota\n`);
  process.stdout.write(`team-b's p95 under abuse: ${ratio}× its baseline (aim: at most 2×)\n`);
}
