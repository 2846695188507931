import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { EmbeddedDatabase } from "../../src/storage/embedded-postgres.js";
import { migratedTemplate } from "./migrated-template.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

export interface DatabaseOptions {
  /**
   * No schema at all, for a test of the migrations themselves (servers started together on a
   * fresh database, a store that migrates its own tables, an upgrade). Else the database is a copy
   * of one already migrated (migrated-template.ts).
   */
  empty?: boolean;
}

/**
 * One real Postgres for a test file, and a fresh database per test so tests never see each
 * other's deploys or DBOS state. The server is TEST_DATABASE_URL's when set (scripts/test.sh starts
 * one for the whole run: test/support/shared-postgres.ts), else an embedded one of this file's.
 * A fresh database already has manent's and DBOS's schema, copied from a template migrated once per
 * server (migrated-template.ts); `{ empty: true }` gives one without.
 */
export class TestPostgres {
  private counter = 0;
  private readonly created: string[] = [];
  private template?: Promise<string>;
  private constructor(
    private readonly adminUrl: string,
    private readonly cleanup: () => Promise<void>,
    /** The data directory of an embedded one of this file's (none on TEST_DATABASE_URL's server). */
    readonly dataDir?: string,
  ) {}

  /** TEST_DATABASE_URL's server, or one of this file's when it is unset. */
  static async start(): Promise<TestPostgres> {
    const shared = process.env.TEST_DATABASE_URL;
    if (!shared) return TestPostgres.startOwn();
    const server: TestPostgres = new TestPostgres(shared, () => server.dropCreated());
    return server;
  }

  /** An embedded Postgres of this file's alone, for a test that stops or kills the server itself. */
  static async startOwn(): Promise<TestPostgres> {
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

  /** Creates a database, migrated unless `empty`, and returns its URL. */
  async createDatabase(opts: DatabaseOptions = {}): Promise<string> {
    const name = `manent_test_${process.pid}_${Date.now()}_${++this.counter}`;
    const template = opts.empty ? undefined : await this.migratedTemplate();
    await this.admin((client) => client.query(`create database ${name}${template ? ` template ${template}` : ""}`));
    this.created.push(name);
    const url = new URL(this.adminUrl);
    url.pathname = `/${name}`;
    return url.toString();
  }

  /** The template's name, asked of the server once per file (a failed attempt is tried again). */
  private migratedTemplate(): Promise<string> {
    this.template ??= migratedTemplate(this.adminUrl).catch((err: unknown) => {
      this.template = undefined;
      throw err;
    });
    return this.template;
  }

  stop(): Promise<void> {
    return this.cleanup();
  }

  /** On a server shared with other files, what this one created goes (a server left connected is disconnected). */
  private async dropCreated(): Promise<void> {
    const names = this.created.splice(0);
    if (names.length === 0) return;
    await this.admin(async (client) => {
      for (const name of names) await client.query(`drop database if exists ${name} with (force)`);
    });
  }

  private async admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client(this.adminUrl);
    client.on("error", () => undefined);
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }
}
