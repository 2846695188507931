import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { killSlotProcesses, startHaproxy, twoSlotHosts, type Haproxy } from "./haproxy.js";
import { TestPostgres } from "./postgres.js";
import { repoRoot, startServer, type ServerProcess } from "./server-process.js";
import { createWorkspace, manentYml, type Workspace } from "./workspace.js";

const run = promisify(execFile);

/** One application of a CanaryServer: its HAProxy, its envconfig writer and its deploy submitter. */
export interface CanaryApp {
  haproxy: Haproxy;
  /** Writes the envconfig, with `rollout` when given (the canary), else a plain deploy. */
  envconfig(rollout?: Record<string, unknown>): Promise<string>;
  /** Submits the example app at `version`; the deploy's id. */
  submit(version: string): Promise<string>;
}

/**
 * The canary e2e tests' fixture (one copy instead of one a test file): a real manent-server with
 * remote-copy, the example app (examples/canary-quickstart) built as 1.0.0 and 1.1.0, and
 * applications on two local targets with two slots each behind their own HAProxy.
 */
export class CanaryServer {
  pg: TestPostgres | undefined;
  ws: Workspace | undefined;
  server: ServerProcess | undefined;
  private readonly proxies: Haproxy[] = [];
  private readonly hostBases: string[] = [];

  /** For `before`: each part is kept as soon as it runs, so `stop` cleans up after a failed start too. */
  async start(): Promise<void> {
    this.pg = await TestPostgres.start();
    this.ws = await createWorkspace("manent-canary-e2e-");
    await run("bash", [join(repoRoot, "examples/canary-quickstart/build.sh"), this.ws.path("dist")]);
    const yml = manentYml(await this.pg.createDatabase(), { plugins: { "remote-copy": {} } });
    this.server = await startServer(await this.ws.write("manent.yml", yml), { cwd: this.ws.dir });
  }

  get api(): ServerProcess["api"] {
    return this.started().server.api;
  }

  get url(): string {
    return this.started().server.url;
  }

  /** An application on two fresh targets behind its own HAProxy; `extra` joins every envconfig it writes. */
  async app(name: string, extra: Record<string, unknown> = {}): Promise<CanaryApp> {
    const { ws, server } = this.started();
    const dir = ws.path(name);
    const { targets, servers } = await twoSlotHosts(["web-1", "web-2"]);
    for (const t of targets) this.hostBases.push(join(dir, "hosts", t.host));
    await ws.write(`${name}/.keep`, "");
    const haproxy = await startHaproxy(dir, servers);
    this.proxies.push(haproxy);
    const envconfig = (rollout?: Record<string, unknown>) =>
      ws.write(`envconfig/untenanted/${name}/${name}/test.yml`, {
        plugin: "remote-copy",
        targets,
        params: {
          transport: "local",
          base: join(dir, "hosts", "{host}"),
          activate: "./activate.sh",
          deactivate: "./deactivate.sh",
          activate_timeout: "30s",
          haproxy_socket: haproxy.socket,
          haproxy_backend: haproxy.backend,
          haproxy_tester_backend: haproxy.testerBackend,
          tester_header: haproxy.testerHeader,
          drain_timeout: "20s",
        },
        rollback: { enabled: true },
        retry_interval: "100ms",
        ...extra,
        ...(rollout && { rollout }),
      });
    const submit = async (version: string) =>
      (
        await server.api.submit({
          descriptor: {
            apiVersion: "manent/v1",
            application: name,
            environment: "test",
            artifact: { type: "tarball", name, version, source: ws.path("dist", `hello-${version}.tar.gz`) },
          },
          descriptor_file: `${name}.yml`,
        })
      ).id;
    return { haproxy, envconfig, submit };
  }

  /** Polls the deploy until its canary waits at `weight` (a pause); fails if it ends first. */
  async pausedAt(id: string, weight: number): Promise<DeployRecord> {
    for (;;) {
      const d = await this.api.deploy(id, 0);
      if (d.rollout?.waiting && d.rollout.canary?.weight === weight) return d;
      if (["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) {
        assert.fail(`deploy ${id} ended ${d.status} before pausing at weight ${weight}: ${JSON.stringify(d.error)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** For `after`: the server, the database, the HAProxies, the app processes the slots left running, the workspace. */
  async stop(): Promise<void> {
    await this.server?.stop();
    await this.pg?.stop();
    for (const p of this.proxies) await p.stop();
    await killSlotProcesses(this.hostBases);
    if (this.ws) await rm(this.ws.dir, { recursive: true, force: true });
  }

  private started(): { ws: Workspace; server: ServerProcess } {
    if (!this.ws || !this.server) throw new Error("CanaryServer: start() has not run");
    return { ws: this.ws, server: this.server };
  }
}
