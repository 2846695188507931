/**
 * One real Postgres for a whole test run, started by scripts/test.sh before the runner and handed
 * to every test file through TEST_DATABASE_URL: each file still gets fresh databases of its own
 * (TestPostgres.createDatabase, dropped at its stop), but the suite runs initdb and a postmaster
 * start once instead of once per file.
 *
 * Usage: node --import tsx test/support/shared-postgres.ts URL_FILE
 * Writes the admin URL to URL_FILE once the server accepts connections, then runs until SIGTERM or
 * SIGINT, when it stops the server and removes its data.
 *
 * Durability settings are off (fsync, synchronous_commit, full_page_writes): they protect against
 * an operating-system crash, which no test causes, and cost a WAL flush at each of the thousands
 * of commits the suite makes. The tests that kill Postgres itself run their own server, with
 * manent's settings (TestPostgres.startOwn, or the server's embedded one).
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { EmbeddedDatabase } from "../../src/storage/embedded-postgres.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const log = {
  ...quiet,
  error: (msg: string, fields?: Record<string, unknown>) => console.error(`shared Postgres: ${msg}`, fields ?? ""),
};

const urlFile = process.argv[2];
if (!urlFile) {
  console.error("usage: shared-postgres.ts URL_FILE");
  process.exit(2);
}

const dir = await mkdtemp(join(tmpdir(), "manent-pg-shared-"));
await chmod(dir, 0o755); // the embedded Postgres runs as the postgres user
let db = await EmbeddedDatabase.start(dir, log);
const settings: Record<string, string> = {
  fsync: "off",
  synchronous_commit: "off",
  full_page_writes: "off",
  // Two files at once, each with several servers and their pools.
  max_connections: "600",
};
const admin = new pg.Client(db.url);
await admin.connect();
for (const [name, value] of Object.entries(settings)) await admin.query(`alter system set ${name} = '${value}'`);
await admin.end();
// max_connections takes a restart; the data directory and its password are kept.
await db.stop();
db = await EmbeddedDatabase.start(dir, log);

let stopping: Promise<void> | undefined;
const stop = (): Promise<void> =>
  (stopping ??= (async () => {
    await db.stop();
    await rm(dir, { recursive: true, force: true });
  })());
for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => void stop().then(() => process.exit(0)));

await writeFile(urlFile, db.url);
// Keeps the process (and with it the supervised postmaster) alive until a signal.
setInterval(() => undefined, 1 << 30);
