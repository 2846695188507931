import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/** Deploys through a real manent-server on real Postgres, with the noop plugin recording every call. */
describe("deploy workflow", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const envconfig = (app: string, env: string, body: Record<string, unknown>) =>
    ws.write(`envconfig/untenanted/${app}/${app}/${env}.yml`, body);
  const journal = () => readJournal(ws.path("journal"));
  const params = (extra: Record<string, string> = {}) => ({ state_dir: ws.path("state"), journal: ws.path("journal"), ...extra });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "hello\n");
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase()));
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("runs every step, deploys every target and records the result", async () => {
    await envconfig("alpha", "test", { plugin: "noop", targets: [{ host: "a" }, { host: "b" }], params: params() });
    const { id } = await server.api.submit({ descriptor: descriptor("alpha", "test", artifact), descriptor_file: "alpha.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(
      d.steps.map((s) => `${s.name}:${s.status}:${s.attempts}`),
      ["resolve:succeeded:1", "fetch:succeeded:1", "validate:succeeded:1", "checkpoint:succeeded:1", "deploy:succeeded:1"],
    );
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as {
      plugin: string;
      targets: { host: string; status: string }[];
    };
    assert.equal(result.plugin, "noop");
    assert.deepEqual(
      result.targets.map((t) => `${t.host}:${t.status}`),
      ["a:deployed", "b:deployed"],
    );
    assert.deepEqual(
      d.targets.map((t) => `${t.phase}:${t.host}:${t.status}`),
      ["deploy:a:deployed", "deploy:b:deployed"],
    );
    assert.equal(await readFile(ws.path("state", "a.release"), "utf8"), "1.0.0");
  });

  it("selects the plugin whose supports() accepts the artifact when the envconfig names none", async () => {
    await envconfig("kappa", "test", { targets: [{ host: "k1" }], params: params() });
    const { id } = await server.api.submit({ descriptor: descriptor("kappa", "test", artifact), descriptor_file: "kappa.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.plugin, "noop");
    await assert.rejects(
      server.api.submit({
        descriptor: {
          ...descriptor("kappa", "test", artifact),
          artifact: { type: "helm", name: "kappa", version: "1.0.0", source: artifact },
        },
        descriptor_file: "kappa.yml",
      }),
      /no configured plugin supports artifact type "helm"; set plugin in the envconfig/,
    );
  });

  it("fetches an http(s) artifact once, verifies it, retries a 5xx and fails a 404 at once", async () => {
    const body = Buffer.from("served over http\n");
    const hits: string[] = [];
    let failNext = 1;
    const web = createServer((req, res) => {
      hits.push(req.url!);
      if (req.url === "/app.txt" && failNext-- > 0) return void res.writeHead(503).end();
      if (req.url === "/app.txt") return void res.writeHead(200, { "content-length": body.length }).end(body);
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
    try {
      await envconfig("lambda", "test", { plugin: "noop", targets: [{ host: "l1" }], params: params(), retry_interval: "10ms" });
      const sha256 = createHash("sha256").update(body).digest("hex");
      const remote = (version: string, path = "/app.txt") => ({
        ...descriptor("lambda", "test", `${base}${path}`, version),
        artifact: { type: "file", name: "lambda", version, source: `${base}${path}`, sha256 },
      });
      const first = await server.api.deploy(
        (await server.api.submit({ descriptor: remote("1.0.0"), descriptor_file: "lambda.yml" })).id,
        60,
      );
      assert.equal(first.status, "succeeded", JSON.stringify(first.error));
      assert.equal(first.steps.find((s) => s.name === "fetch")!.attempts, 2, "the 503 was retried");
      // The verified bytes are cached by sha256: the next release of the same bytes reads nothing.
      const second = await server.api.deploy(
        (await server.api.submit({ descriptor: remote("1.0.1"), descriptor_file: "lambda.yml" })).id,
        60,
      );
      assert.equal(second.status, "succeeded");
      assert.deepEqual(hits, ["/app.txt", "/app.txt"]);

      const missing = await server.api.deploy(
        (await server.api.submit({ descriptor: remote("1.0.2", "/gone.txt"), descriptor_file: "lambda.yml" })).id,
        60,
      );
      assert.equal(missing.status, "failed");
      assert.match(missing.error!.message, /gone\.txt: HTTP 404/);
      assert.equal(missing.steps.find((s) => s.name === "fetch")!.attempts, 1, "a 404 is not retried");
    } finally {
      web.close();
    }
  });

  it("retries a transient failure and succeeds on the next attempt", async () => {
    await envconfig("beta", "test", {
      plugin: "noop",
      targets: [{ host: "b1" }],
      params: params({ fail_hosts: "b1", fail_mode: "transient", fail_times: "2" }),
      max_retries: 3,
      retry_interval: "10ms",
    });
    const { id } = await server.api.submit({ descriptor: descriptor("beta", "test", artifact), descriptor_file: "beta.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3);
    assert.equal((await journal()).filter((j) => j.deployment === id && j.call === "deploy").length, 3);
  });

  it("fails a permanent error at once, without retries", async () => {
    await envconfig("gamma", "test", {
      plugin: "noop",
      targets: [{ host: "g1" }],
      params: params({ fail_hosts: "g1", fail_mode: "permanent" }),
      max_retries: 5,
      retry_interval: "10ms",
    });
    const { id } = await server.api.submit({ descriptor: descriptor("gamma", "test", artifact), descriptor_file: "gamma.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "failed");
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1);
    assert.equal(d.error?.code, "aborted");
    assert.match(d.error!.message, /target g1: failing as configured/);
    assert.equal((await journal()).filter((j) => j.deployment === id && j.call === "deploy").length, 1);
  });

  it("fails at once when the plugin asks for a secret the envconfig does not declare", async () => {
    await envconfig("epsilon", "test", {
      plugin: "noop",
      targets: [{ host: "e1" }],
      params: params({ read_secret: "never-declared" }),
      max_retries: 5,
      retry_interval: "10ms",
    });
    const { id } = await server.api.submit({ descriptor: descriptor("epsilon", "test", artifact), descriptor_file: "epsilon.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "failed");
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 1, "the envconfig must change: no retry");
    assert.match(d.error!.message, /secret "never-declared" is not declared in the envconfig's secrets \(add \{name: never-declared/);
  });

  it("gives up after max_retries on a failure that does not pass", async () => {
    await envconfig("delta", "test", {
      plugin: "noop",
      targets: [{ host: "d1" }],
      params: params({ fail_hosts: "d1", fail_mode: "transient" }),
      steps: { deploy: { max_retries: 2 } },
      retry_interval: "10ms",
    });
    const { id } = await server.api.submit({ descriptor: descriptor("delta", "test", artifact), descriptor_file: "delta.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "failed");
    assert.equal(d.steps.find((s) => s.name === "deploy")!.attempts, 3);
    assert.match(d.error!.message, /failing as configured .*\(after 3 attempts\)/);
  });

  it("rolls a failed deploy back to the checkpointed release of every target", async () => {
    await envconfig("eps", "test", {
      plugin: "noop",
      targets: [{ host: "e1" }, { host: "e2" }],
      params: params(),
      rollback: { enabled: true },
    });
    const first = await server.api.submit({ descriptor: descriptor("eps", "test", artifact, "1.0.0"), descriptor_file: "eps.yml" });
    assert.equal((await server.api.deploy(first.id, 60)).status, "succeeded");
    await envconfig("eps", "test", {
      plugin: "noop",
      targets: [{ host: "e1" }, { host: "e2" }],
      params: params({ fail_hosts: "e2" }),
      rollback: { enabled: true },
    });
    const second = await server.api.submit({ descriptor: descriptor("eps", "test", artifact, "2.0.0"), descriptor_file: "eps.yml" });
    const d = await server.api.deploy(second.id, 60);
    assert.equal(d.status, "rolled_back");
    assert.match(d.error!.message, /target e2: failing as configured.*; rollback completed$/);
    const checkpoint = JSON.parse(d.steps.find((s) => s.name === "checkpoint")!.output!.result) as {
      releases: { host: string; version: string }[];
    };
    assert.deepEqual(checkpoint.releases, [
      { host: "e1", version: "1.0.0" },
      { host: "e2", version: "1.0.0" },
    ]);
    assert.equal(await readFile(ws.path("state", "e1.release"), "utf8"), "1.0.0");
    assert.equal(await readFile(ws.path("state", "e2.release"), "utf8"), "1.0.0");
  });

  it("does not roll back when rollback is not enabled, and says why in the checkpoint", async () => {
    await envconfig("zeta", "test", { plugin: "noop", targets: [{ host: "z1" }], params: params({ fail_hosts: "z1" }) });
    const { id } = await server.api.submit({ descriptor: descriptor("zeta", "test", artifact), descriptor_file: "zeta.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "failed");
    assert.equal(
      d.steps.some((s) => s.name === "rollback"),
      false,
    );
    const checkpoint = JSON.parse(d.steps.find((s) => s.name === "checkpoint")!.output!.result) as {
      can_rollback: boolean;
      no_rollback_reason: string;
    };
    assert.equal(checkpoint.can_rollback, false);
    assert.match(checkpoint.no_rollback_reason, /rollback.enabled is false/);
  });

  it("dry-runs through the plugin and changes nothing", async () => {
    await envconfig("eta", "test", { plugin: "noop", targets: [{ host: "h1" }], params: params() });
    const { id } = await server.api.submit({ descriptor: descriptor("eta", "test", artifact), descriptor_file: "eta.yml", dry_run: true });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded");
    assert.equal(d.kind, "dry_run");
    assert.deepEqual(
      d.steps.map((s) => s.name),
      ["resolve", "fetch", "validate", "deploy"],
    );
    const result = JSON.parse(d.steps.find((s) => s.name === "deploy")!.output!.result) as { targets: { status: string }[] };
    assert.equal(result.targets[0]!.status, "ready");
    await assert.rejects(readFile(ws.path("state", "h1.release"), "utf8"), /ENOENT/);
  });

  it("never runs two deploys of the same application and environment at once: the second waits", async () => {
    await envconfig("theta", "test", { plugin: "noop", targets: [{ host: "t1" }], params: params({ delay: "400ms" }) });
    const a = await server.api.submit({ descriptor: descriptor("theta", "test", artifact, "1.0.0"), descriptor_file: "theta.yml" });
    const b = await server.api.submit({ descriptor: descriptor("theta", "test", artifact, "2.0.0"), descriptor_file: "theta.yml" });
    assert.equal(b.queued_behind, a.id);
    const [da, db] = [await server.api.deploy(a.id, 60), await server.api.deploy(b.id, 60)];
    assert.equal(da.status, "succeeded");
    assert.equal(db.status, "succeeded");
    assert.ok(
      Date.parse(db.started_at!) >= Date.parse(da.finished_at!),
      `second started ${db.started_at} before first finished ${da.finished_at}`,
    );
    assert.equal(await readFile(ws.path("state", "t1.release"), "utf8"), "2.0.0");
  });

  it("rolls back on request to the release before the current one, without fetching", async () => {
    await envconfig("iota", "test", { plugin: "noop", targets: [{ host: "i1" }], params: params() });
    for (const v of ["1.0.0", "1.1.0"]) {
      const { id } = await server.api.submit({ descriptor: descriptor("iota", "test", artifact, v), descriptor_file: "iota.yml" });
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    }
    const { id } = await server.api.rollback({ descriptor: descriptor("iota", "test", artifact), descriptor_file: "iota.yml" });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.kind, "rollback");
    assert.equal(d.version, "1.0.0");
    assert.equal(
      d.steps.some((s) => s.name === "fetch"),
      false,
    );
    assert.equal(await readFile(ws.path("state", "i1.release"), "utf8"), "1.0.0");
  });
});
