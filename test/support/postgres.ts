import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { EmbeddedDatabase } from "../../src/storage/embedded-postgres.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * One real Postgres for a test file (the embedded one, or TEST_DATABASE_URL's server), and a
 * fresh database per test so tests never see each other's deploys or DBOS state.
 */
export class TestPostgres {
  private counter = 0;
  private constructor(
    private readonly adminUrl: string,
    private readonly cleanup: () => Promise<void>,
    /** The data directory of the embedded one (none with TEST_DATABASE_URL). */
    readonly dataDir?: string,
  ) {}

  static async start(): Promise<TestPostgres> {
    if (process.env.TEST_DATABASE_URL) return new TestPostgres(process.env.TEST_DATABASE_URL, async () => {});
    const dir = await mkdtemp(join(tmpdir(), "manent-pg-"));
    await chmod(dir, 0o755); // the embedded Postgres runs as the postgres user
    const db = await EmbeddedDatabase.start(dir, quiet);
    return new TestPostgres(
      db.url,
      async () => {
        await db.stop();
        await rm(dir, { recursive: true, force: true });
      },
      join(dir, "postgres", "data"),
    );
  }

  /** Creates an empty database and returns its URL. */
  async createDatabase(): Promise<string> {
    const name = `manent_test_${process.pid}_${Date.now()}_${++this.counter}`;
    const client = new pg.Client(this.adminUrl);
    await client.connect();
    try {
      await client.query(`create database ${name}`);
    } finally {
      await client.end();
    }
    const url = new URL(this.adminUrl);
    url.pathname = `/${name}`;
    return url.toString();
  }

  stop(): Promise<void> {
    return this.cleanup();
  }
}
