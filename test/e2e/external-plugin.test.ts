import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { buildGoBinaries } from "../interop/go-tools.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, type Workspace } from "../support/workspace.js";

const sha256 = (b: Buffer | string): string => createHash("sha256").update(b).digest("hex");
/** The processes a server has started (the embedded Postgres is not used here: the database is external). */
/**
 * The server's child processes but the esbuild service that tsx starts on its own when the server
 * (run from TypeScript sources) loads a module lazily: only a plugin process counts here.
 */
const children = (pid: number): string => {
  try {
    const out = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(pid)], { encoding: "utf8" });
    return out
      .split("\n")
      .filter((line) => line.trim() !== "" && !/\/esbuild --service=/.test(line))
      .join("\n")
      .trim();
  } catch {
    return ""; // ps exits 1 when there is none
  }
};

/**
 * An external plugin (the sample Go plugin, on hashicorp/go-plugin) configured in manent.yml
 * deploys through the normal workflow exactly like a built-in: secrets through the broker,
 * checkpoint, automatic rollback, dry-run; `manent plugins` never starts it.
 */
describe("external plugin through the deploy workflow", () => {
  let db: TestPostgres;
  let ws: Workspace;
  let config: string;
  let server: ServerProcess;
  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url });
  const envconfig = (params: Record<string, string>) =>
    ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "sample",
      targets: [{ host: "h1" }, { host: "h2" }],
      params: { base: ws.path("targets"), ...params },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
      rollback: { enabled: true },
      max_retries: 1,
      retry_interval: "10ms",
      parallel: 2,
    });

  before(async () => {
    const { goSample } = await buildGoBinaries();
    db = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("keys/deploy-key", "the-deploy-key");
    await ws.write("d.yml", descriptor("shop", "prod", await ws.write("dist/shop.txt", "shop v1\n")));
    await envconfig({});
    config = await ws.write("manent.yml", {
      dbos: { database_url: await db.createDatabase() },
      workdir: "./work",
      plugins: { sample: { external: { command: goSample, sha256: sha256(await readFile(goSample)) } } },
      envconfig: { providers: [{ name: "default", type: "file", file: { path: "./envconfig/{tenant}/{application}/{artifact}/{environment}.yml" } }] },
    });
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await db?.stop();
  });

  it("is listed by `manent plugins` without being started", async () => {
    const r = await cli("plugins", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), [
      { name: "sample", kind: "external", capabilities: null, capabilities_as_of: null, status: "not_started", restarts: 0, last_start: null },
    ]);
    assert.equal(children(server.child.pid!), "", "the plugin process was started");
  });

  it("deploys with a secret fetched through the broker", async () => {
    const r = await cli("deploy", "-f", "d.yml", "-o", "json");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    for (const h of ["h1", "h2"]) {
      assert.equal((await readFile(ws.path("targets", h, "current"), "utf8")).trim(), "1.0.0");
      assert.equal((await readFile(ws.path("targets", h, "key.sha256"), "utf8")).trim(), sha256("the-deploy-key"));
    }
    const plugins = JSON.parse((await cli("plugins", "-o", "json")).stdout) as { capabilities: string[] }[];
    assert.deepEqual(plugins[0]!.capabilities, ["dry_run", "current_release", "rollback", "slots", "traffic_router", "testers", "scale", "parallel_targets"]);
  });

  it("retries a failing target, then rolls every target back to the checkpoint", async () => {
    await envconfig({ fail_host: "h2" });
    const r = await cli("deploy", "-f", "d.yml", "--version", "2.0.0", "-o", "json");
    assert.equal(r.code, 1);
    const d = JSON.parse(r.stdout) as { status: string; steps: { name: string; attempts: number; status: string }[] };
    assert.equal(d.status, "rolled_back");
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 2);
    assert.equal(d.steps.find((s) => s.name === "rollback")!.status, "succeeded");
    for (const h of ["h1", "h2"]) assert.equal((await readFile(ws.path("targets", h, "current"), "utf8")).trim(), "1.0.0");
    await envconfig({});
  });

  it("dry-runs through the plugin", async () => {
    const r = await cli("deploy", "-f", "d.yml", "--version", "3.0.0", "--dry-run", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const d = JSON.parse(r.stdout) as { steps: { name: string; output: { result: string } }[] };
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output.result) as { targets: { status: string }[] };
    assert.deepEqual(result.targets.map((t) => t.status), ["ready", "ready"]);
    assert.equal((await readFile(ws.path("targets", "h1", "current"), "utf8")).trim(), "1.0.0");
  });

  it("after a restart, lists the capabilities learnt at the last start without starting it", async () => {
    await server.stop();
    server = await startServer(config, { cwd: ws.dir });
    const plugins = JSON.parse((await cli("plugins", "-o", "json")).stdout) as { capabilities: string[]; capabilities_as_of: string; status: string }[];
    assert.equal(plugins[0]!.status, "not_started", "this server has not started it");
    assert.deepEqual(plugins[0]!.capabilities, ["dry_run", "current_release", "rollback", "slots", "traffic_router", "testers", "scale", "parallel_targets"]);
    assert.ok(plugins[0]!.capabilities_as_of);
    assert.equal(children(server.child.pid!), "");
  });
});
