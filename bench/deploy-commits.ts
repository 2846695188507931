/**
 * Issue 31, item 1: the Postgres commits of one no-op deploy, statement by statement. One real
 * `manent-server` (its pg connections tallied by bench/support/statement-tally.cjs, loaded with
 * --require: a statement outside a transaction is one commit, BEGIN … COMMIT one), three warm-up
 * deploys, then N sequential deploys of one application; prints the commits per deploy and each
 * statement's (a transaction's as TX[its statements]) per deploy. Sequential, so the server's
 * timers (queue polls, heartbeats, health checks) are counted too: bench/throughput.ts gives the
 * figure at saturation.
 *
 * Run: node --import tsx bench/deploy-commits.ts [N=20]
 */
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TestPostgres } from "../test/support/postgres.js";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
const n = Number(process.argv[2] ?? 20);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ws = await createWorkspace("manent-count-");
const artifact = await ws.write("dist/app.txt", "bench\n");
await ws.write(`envconfig/untenanted/app0/app0/bench.yml`, { plugin: "noop", targets: [{ host: `h0` }] });
const pgs = await TestPostgres.start();
const url = await pgs.createDatabase();
const config = await ws.write("manent.yml", manentYml(url, {}));
const server = await startServer(config, {
  cwd: ws.dir,
  env: {
    MANENT_LOG_LEVEL: "warn",
    COUNT_ROOT: root,
    TALLY_DIR: tmpdir(),
    NODE_OPTIONS: `--require ${path.join(root, "bench/support/statement-tally.cjs")}`,
  },
});
let v = 0;
const one = async () => {
  const { id } = await server.api.submit({ descriptor: descriptor("app0", "bench", artifact, `1.0.${++v}`), descriptor_file: "bench" });
  let d = await server.api.deploy(id, 60);
  while (d.status === "queued" || d.status === "running") d = await server.api.deploy(id, 60);
  if (d.status !== "succeeded") throw new Error(d.status);
};
for (let i = 0; i < 3; i++) await one();
const pid = server.child.pid!;
process.kill(pid, "SIGUSR2");
const t0 = Date.now();
for (let i = 0; i < n; i++) await one();
const ms = Date.now() - t0;
process.kill(pid, "SIGUSR1");
await new Promise((r) => setTimeout(r, 500));
const text = await readFile(path.join(tmpdir(), `manent-tally-${pid}.txt`), "utf8");
console.log(`${n} sequential deploys in ${ms} ms; per deploy:`);
const lines = text.trim().split("\n");
console.log(`commits ${(Number(lines[0]!.split(" ")[1]) / n).toFixed(1)}`);
for (const l of lines.slice(1, 60)) {
  const m = /^\s*(\d+) (.*)$/.exec(l)!;
  console.log(`${(Number(m[1]) / n).toFixed(2).padStart(6)} ${m[2]}`);
}
await server.stop();
await pgs.stop();
