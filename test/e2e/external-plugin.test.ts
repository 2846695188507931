import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, readFile, rm, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { isFinishEvent } from "../../src/core/engine/deploy-events.js";
import { buildGoBinaries } from "../interop/go-tools.js";
import { collect } from "../support/event-stream.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, type Workspace } from "../support/workspace.js";

const sha256 = (b: Buffer | string): string => createHash("sha256").update(b).digest("hex");
/**
 * The processes a server has started (the embedded Postgres is not used here: the database is
 * external). The server runs compiled JavaScript (dist/), so no tsx or esbuild service is among them.
 */
const children = (pid: number): string => {
  try {
    return execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(pid)], { encoding: "utf8" }).trim();
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
  let flaky: string;
  let foreign: string;
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
    await writeFile(ws.path("broken"), "");
    flaky = ws.path("flaky-plugin");
    await writeFile(
      flaky,
      `#!/bin/sh\nif [ -e '${ws.path("broken")}' ]; then echo "cannot open its data directory" >&2; exit 3; fi\nexec '${goSample}'\n`,
    );
    await chmod(flaky, 0o755);
    foreign = ws.path("foreign-plugin");
    await writeFile(foreign, `#!/bin/sh\nMANENT_PLUGIN=another-host exec '${goSample}'\n`);
    await chmod(foreign, 0o755);
    config = await ws.write("manent.yml", {
      dbos: { database_url: await db.createDatabase() },
      workdir: "./work",
      plugins: {
        sample: {
          external: {
            command: goSample,
            sha256: sha256(await readFile(goSample)),
            // A hung plugin is declared dead after 2 checks of 500 ms, 200 ms apart.
            supervision: { ping_interval: "200ms", ping_timeout: "500ms", max_ping_failures: 2 },
          },
        },
        // The same plugin behind a script that fails while a flag file exists: a plugin that gives up.
        flaky: { external: { command: flaky, supervision: { max_restart_attempts: 0, restart_backoff: "10ms", cooldown: "0s" } } },
        // The sample run with another host's magic cookie, as a go-plugin binary built for another host sees manent.
        foreign: { external: { command: foreign } },
      },
      envconfig: {
        providers: [{ name: "default", type: "file", file: { path: "./envconfig/{tenant}/{application}/{artifact}/{environment}.yml" } }],
      },
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
      {
        name: "sample",
        kind: "external",
        capabilities: null,
        capabilities_as_of: null,
        status: "not_started",
        restarts: 0,
        last_start: null,
        last_error: null,
      },
      {
        name: "flaky",
        kind: "external",
        capabilities: null,
        capabilities_as_of: null,
        status: "not_started",
        restarts: 0,
        last_start: null,
        last_error: null,
      },
      {
        name: "foreign",
        kind: "external",
        capabilities: null,
        capabilities_as_of: null,
        status: "not_started",
        restarts: 0,
        last_start: null,
        last_error: null,
      },
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
    assert.deepEqual(plugins[0]!.capabilities, [
      "dry_run",
      "current_release",
      "rollback",
      "slots",
      "traffic_router",
      "testers",
      "scale",
      "parallel_targets",
    ]);
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
    assert.deepEqual(
      result.targets.map((t) => t.status),
      ["ready", "ready"],
    );
    assert.equal((await readFile(ws.path("targets", "h1", "current"), "utf8")).trim(), "1.0.0");
  });

  it("finds a SIGSTOPped plugin within its supervision settings: the call in flight fails as retryable at once, and the deploy retries on a restarted plugin", async () => {
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "sample",
      targets: [{ host: "h1" }, { host: "h2" }],
      params: { base: ws.path("targets"), delay_ms: "2000" },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
      retry_interval: "10ms",
      parallel: 2,
      // Far beyond the test: only the supervisor can end the frozen call early.
      steps: { deploy: { timeout: "10m", max_retries: 2 } },
    });
    const submitted = await cli("deploy", "-f", "d.yml", "--version", "5.0.0", "--no-wait", "-o", "json");
    assert.equal(submitted.code, 0, submitted.stderr);
    const { id } = JSON.parse(submitted.stdout) as { id: string };
    const events = collect(server.url, "", `/api/v1/deploys/${id}/events`, { after: 0 });
    try {
      // The plugin has the call: it logged the start of this deploy (forwarded to the server's log).
      await until(() =>
        server
          .logs()
          .split("\n")
          .some((l) => l.includes('"deploy started"') && l.includes(id)),
      );
      // The server's only plugin now: the sample plugin (the flaky one has not been used yet);
      // beside it, the plugin host's reaper (it kills the plugins if the server dies).
      const running = children(server.child.pid!)
        .split("\n")
        .filter((l) => !l.endsWith("manent-plugin-reaper"));
      assert.equal(running.length, 1, running.join("\n"));
      const pid = Number(running[0]!.trim().split(/\s+/)[0]);
      const stoppedAt = Date.now();
      process.kill(pid, "SIGSTOP");
      const failed = await events.waitFor((e) => e.type === "step.failed" && e.data.name === "deploy");
      const error = failed.data.error as { code: string; message: string };
      assert.equal(error.code, "unavailable");
      assert.match(
        error.message,
        /plugin sample: process was killed after 2 failed health checks .* during Deploy; it is being restarted, retry the call/,
      );
      console.log(`# SIGSTOP to the failed attempt: ${failed.receivedAt - stoppedAt} ms (2 checks of 500 ms, 200 ms apart; not asserted)`);
      await events.waitFor(isFinishEvent);
      const d = await server.api.deploy(id);
      assert.equal(d.status, "succeeded", JSON.stringify(d.error));
      assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 2);
      for (const h of ["h1", "h2"]) assert.equal((await readFile(ws.path("targets", h, "current"), "utf8")).trim(), "5.0.0");
      const sample = (JSON.parse((await cli("plugins", "-o", "json")).stdout) as { name: string; status: string; restarts: number }[])[0]!;
      assert.deepEqual([sample.name, sample.status, sample.restarts], ["sample", "up", 1]);
      assert.ok(!children(server.child.pid!).includes(`${pid} `), "the hung process is still there");
    } finally {
      await events.stop();
      await envconfig({});
    }
  });

  it("restarts a plugin that gave up with `manent plugins restart`, without restarting the server, and audits it", async () => {
    await envconfig({});
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "flaky",
      targets: [{ host: "h1" }],
      params: { base: ws.path("flaky-targets") },
      secrets: [{ name: "deploy-key", ref: `file:${ws.path("keys/deploy-key")}` }],
      max_retries: 1,
      retry_interval: "10ms",
    });
    try {
      const failed = await cli("deploy", "-f", "d.yml", "--version", "6.0.0", "-o", "json");
      assert.equal(failed.code, 1, failed.stderr);
      const d = JSON.parse(failed.stdout) as { status: string; error: { message: string } };
      assert.equal(d.status, "failed");
      assert.match(
        d.error.message,
        /plugin flaky: gave up after 1 consecutive failures, not restarting it; last error: .*cannot open its data directory/,
      );
      const plugins = JSON.parse((await cli("plugins", "-o", "json")).stdout) as { name: string; status: string }[];
      assert.equal(plugins.find((p) => p.name === "flaky")!.status, "gave_up");

      await rm(ws.path("broken"));
      const restarted = await cli("plugins", "restart", "flaky", "-o", "text");
      assert.equal(restarted.code, 0, restarted.stderr);
      assert.match(restarted.stdout, /^flaky restarted: up since \d{4}-/);
      const ok = await cli("deploy", "-f", "d.yml", "--version", "6.0.0", "-o", "json");
      assert.equal(ok.code, 0, ok.stdout + ok.stderr);
      assert.equal((await readFile(ws.path("flaky-targets", "h1", "current"), "utf8")).trim(), "6.0.0");

      const unknown = await cli("plugins", "restart", "nope");
      assert.equal(unknown.code, 2, unknown.stderr);
      assert.match(unknown.stderr, /no plugin nope \(configured: flaky, foreign, sample\)/);
      const audit = JSON.parse((await cli("audit", "--action", "plugin_restart", "-o", "json")).stdout) as {
        outcome: string;
        message: string;
      }[];
      assert.deepEqual(
        audit.map((e) => [e.outcome, e.message.slice(0, 16)]),
        [
          ["not_found", "no plugin nope ("],
          ["ok", "plugin flaky"],
        ],
      );
    } finally {
      await envconfig({});
    }
  });

  it("fails a deploy through a plugin that refuses the magic cookie once, permanently, saying so", async () => {
    await ws.write("envconfig/untenanted/shop/shop/prod.yml", {
      plugin: "foreign",
      targets: [{ host: "h1" }],
      params: { base: ws.path("foreign-targets") },
      max_retries: 3,
      retry_interval: "10ms",
    });
    try {
      const r = await cli("deploy", "-f", "d.yml", "--version", "7.0.0", "-o", "json");
      assert.equal(r.code, 1, r.stderr);
      const d = JSON.parse(r.stdout) as {
        status: string;
        error: { code: string; message: string };
        steps: { name: string; attempts: number; status: string }[];
      };
      assert.equal(d.status, "failed");
      assert.equal(d.error.code, "failed_precondition");
      assert.match(
        d.error.message,
        /plugin foreign: exited before the handshake \(exit code 1\): it refused manent's magic cookie MANENT_PLUGIN/,
      );
      const failedStep = d.steps.find((s) => s.status === "failed")!;
      assert.equal(failedStep.attempts, 1, `${failedStep.name} was retried`);
      const foreignLog = server
        .logs()
        .split("\n")
        .filter((l) => l.includes('"plugin":"foreign"') && l.includes('"stream":"stderr"') && l.includes("This binary is a plugin"));
      assert.equal(foreignLog.length, 1, "the binary was started more than once");
      const plugins = JSON.parse((await cli("plugins", "-o", "json")).stdout) as { name: string; status: string }[];
      assert.equal(plugins.find((p) => p.name === "foreign")!.status, "gave_up");
    } finally {
      await envconfig({});
    }
  });

  it("after a restart, lists the capabilities learnt at the last start without starting it", async () => {
    await server.stop();
    server = await startServer(config, { cwd: ws.dir });
    const plugins = JSON.parse((await cli("plugins", "-o", "json")).stdout) as {
      capabilities: string[];
      capabilities_as_of: string;
      status: string;
    }[];
    assert.equal(plugins[0]!.status, "not_started", "this server has not started it");
    assert.deepEqual(plugins[0]!.capabilities, [
      "dry_run",
      "current_release",
      "rollback",
      "slots",
      "traffic_router",
      "testers",
      "scale",
      "parallel_targets",
    ]);
    assert.ok(plugins[0]!.capabilities_as_of);
    assert.equal(children(server.child.pid!), "");
  });
});

/** Polls a condition that no event announces (a line in the server's log). */
async function until(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not true within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
