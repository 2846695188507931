import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { migrate, underSchemaLock } from "../../src/storage/schema.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** The lock that makes one process at a time build the template on a server ("manent-tpl"). */
const templateLock = 0x6d2d74706c;

const storageDir = fileURLToPath(new URL("../../src/storage/", import.meta.url));

/**
 * What the template's schema depends on: manent's storage sources (its migrate and the statements
 * it runs) and the installed DBOS (its system-database migrations). A template of another checkout
 * or DBOS version on a long-lived server of yours (TEST_DATABASE_URL) has another name and is
 * never cloned.
 */
async function fingerprint(): Promise<string> {
  const hash = createHash("sha256");
  for (const file of (await readdir(storageDir)).filter((f) => f.endsWith(".ts")).sort())
    hash
      .update(file)
      .update("\0")
      .update(await readFile(storageDir + file));
  // The package's exports leave out its package.json: found above its entry point.
  const dbosMain = createRequire(import.meta.url).resolve("@dbos-inc/dbos-sdk");
  const dbosPackage = join(dbosMain.slice(0, dbosMain.lastIndexOf(`${sep}dist${sep}`)), "package.json");
  hash.update((JSON.parse(await readFile(dbosPackage, "utf8")) as { version: string }).version);
  return hash.digest("hex").slice(0, 16);
}

const withDatabase = (adminUrl: string, name: string): string => {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
};

/**
 * The name of a database on `adminUrl`'s server holding manent's schema and DBOS's system schema,
 * made by the migrations a server runs at its start (storage/schema.ts `migrate`, under its schema
 * lock, and DBOS's own, which `DBOS.launch` runs: `DBOS.migrate` is the same runner with the same
 * defaults), and nothing else: no rows of a server. `CREATE DATABASE … TEMPLATE` copies it in a
 * fraction of the time the migrations take, so a test's server starts with nothing to migrate
 * (which its start still checks).
 *
 * Made once per server and schema (see fingerprint), by whichever test process asks first: the
 * others wait on an advisory lock and take it once it is marked a template. It is made with
 * connections refused afterwards (`allow_connections false`), since Postgres refuses to copy a
 * database anyone is connected to.
 */
export async function migratedTemplate(adminUrl: string): Promise<string> {
  const name = `manent_template_${await fingerprint()}`;
  const admin = new pg.Client(adminUrl);
  admin.on("error", () => undefined);
  await admin.connect();
  const ready = async (): Promise<boolean> =>
    (await admin.query("select 1 from pg_database where datname = $1 and datistemplate", [name])).rowCount === 1;
  try {
    if (await ready()) return name;
    // Blocking, on the admin database: the migrations run in the template's own database, so this
    // waiting session holds no snapshot a CREATE INDEX CONCURRENTLY there waits for.
    await admin.query("select pg_advisory_lock($1)", [templateLock]);
    try {
      if (await ready()) return name;
      // One left half made, by a process killed while it made it, is made again.
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.query(`create database ${name}`);
      const url = withDatabase(adminUrl, name);
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      pool.on("error", () => undefined);
      try {
        await underSchemaLock(pool, quiet, () => migrate(pool));
      } finally {
        await pool.end();
      }
      // Imported here: only the process that makes the template loads DBOS for it.
      const { DBOS } = await import("@dbos-inc/dbos-sdk");
      await DBOS.migrate(url);
      await admin.query(`alter database ${name} with is_template true allow_connections false`);
      return name;
    } finally {
      await admin.query("select pg_advisory_unlock($1)", [templateLock]);
    }
  } finally {
    await admin.end();
  }
}
