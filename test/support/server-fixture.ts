import { TestPostgres } from "./postgres.js";
import { startServer, type ServerProcess } from "./server-process.js";
import { createWorkspace, manentYml, type Workspace } from "./workspace.js";

/** What `ServerFixture.start` made: the workspace, the running server, its manent.yml and the artifact. */
export interface StartedServer {
  pg: TestPostgres;
  ws: Workspace;
  server: ServerProcess;
  /** manent.yml's path, to start the server again on the same database. */
  config: string;
  /** dist/app.txt in the workspace. */
  artifact: string;
}

/**
 * A real manent-server on a fresh database, its workspace holding one artifact (dist/app.txt): the
 * set-up most server tests share, written once so that each test states only its manent.yml extras.
 */
export class ServerFixture {
  pg: TestPostgres | undefined;
  ws: Workspace | undefined;
  server: ServerProcess | undefined;

  /** For `before`: each part is kept as soon as it runs, so `stop` cleans up after a failed start too. */
  async start(artifactText: string, extra: Record<string, unknown> = {}): Promise<StartedServer> {
    const pg = (this.pg = await TestPostgres.start());
    const ws = (this.ws = await createWorkspace());
    const artifact = await ws.write("dist/app.txt", artifactText);
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), extra));
    const server = (this.server = await startServer(config, { cwd: ws.dir }));
    return { pg, ws, server, config, artifact };
  }

  /** For `after`: the server `start` started (a test stops the ones it starts itself), then the database. */
  async stop(): Promise<void> {
    await this.server?.stop();
    await this.pg?.stop();
  }
}
