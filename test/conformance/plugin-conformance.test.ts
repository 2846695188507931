/**
 * Conformance of an external plugin to the manent plugin protocol (docs/plugin-protocol.md).
 * Runs against the command in MANENT_CONFORMANCE_PLUGIN, by default the TypeScript sample.
 * The protocol checks hold for any plugin; the behaviour checks assume the samples' contract
 * (params `base`, `fail_host`, `delay_ms`, secret `deploy-key`) and are skipped with
 * MANENT_CONFORMANCE_SAMPLE=0.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { allCapabilities, Code, isPermanent, ManentError, ResultError, type Deployer } from "../../src/plugin.js";
import { ExternalPlugin } from "../../src/external/host/index.js";
import { pluginEnvironment } from "../../src/external/host/environment.js";
import { DeployerClient } from "../../src/external/gen/deployer.js";
import { GRPCControllerClient } from "../../src/external/gen/go-plugin/grpc_controller.js";
import { HealthCheckResponse_ServingStatus, HealthClient } from "../../src/external/gen/go-plugin/health.js";
import { clientCredentials, tlsChannelOptions } from "../../src/external/protocol/credentials.js";
import { parseHandshake } from "../../src/external/protocol/handshake.js";
import { derToPem, generateIdentity, type Identity } from "../../src/external/protocol/mtls.js";
import { buildSamplePlugin, mapSecrets, pluginFields, recordingLogger, request, tempDir, waitGone } from "../external/helpers.js";

const sampleChecks = process.env.MANENT_CONFORMANCE_SAMPLE !== "0";

/** A bare go-plugin host: spawn, read the handshake, connect with our identity. */
async function rawStart(command: string, dir: string) {
  const identity = await generateIdentity();
  const child = spawn(command, [], { env: pluginEnvironment(process.env, {}, identity.certPem, dir), stdio: ["pipe", "pipe", "pipe"] });
  child.stderr!.resume();
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  const hs = parseHandshake(line, "conformance");
  assert.ok(hs.serverCert, "the handshake must carry the AutoMTLS server certificate");
  const target = hs.network === "unix" ? `unix:${hs.address}` : hs.address;
  const creds = () => clientCredentials(identity, derToPem(hs.serverCert!), hs.serverCert!);
  return { child, line, hs, target, identity, creds };
}

const unary = <T>(fn: (cb: (err: ServiceError | null, res: T) => void) => void) =>
  new Promise<T>((resolve, reject) => fn((err, res) => (err ? reject(err) : resolve(res))));

describe("plugin protocol conformance", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let command: string;
  before(async () => {
    t = await tempDir("manent-conformance-");
    command = process.env.MANENT_CONFORMANCE_PLUGIN ? path.resolve(process.env.MANENT_CONFORMANCE_PLUGIN) : await buildSamplePlugin(t.dir);
  });
  after(() => t.cleanup());

  it("refuses to run without the magic cookie and writes nothing on stdout", async () => {
    const child = spawn(command, [], { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.resume();
    const [code] = (await once(child, "exit")) as [number | null];
    assert.notEqual(code, 0);
    assert.equal(out, "");
  });

  describe("over a raw go-plugin connection", () => {
    let p: Awaited<ReturnType<typeof rawStart>>;
    let sockets: string;
    before(async () => {
      sockets = await mkdtemp(path.join(os.tmpdir(), "manent-conf-sock-"));
      p = await rawStart(command, sockets);
    });
    after(async () => {
      if (p.child.exitCode === null) p.child.kill("SIGKILL");
      await rm(sockets, { recursive: true, force: true });
    });

    it("prints a go-plugin handshake: core 1, app 1, unix or tcp, grpc, a localhost certificate", () => {
      const fields = p.line.trim().split("|");
      assert.equal(fields.length, 6, `want 6 fields, got ${p.line}`);
      assert.deepEqual(fields.slice(0, 1), ["1"]);
      assert.equal(fields[1], "1");
      assert.equal(fields[4], "grpc");
      assert.ok(!fields[5]!.endsWith("="), "the certificate is raw base64 without padding");
      const cert = new X509Certificate(p.hs.serverCert!);
      assert.match(cert.subjectAltName ?? "", /DNS:localhost/);
    });

    it('reports the health service "plugin" as SERVING', async () => {
      const h = new HealthClient(p.target, p.creds(), tlsChannelOptions);
      const res = await unary<{ status: HealthCheckResponse_ServingStatus }>((cb) => h.check({ service: "plugin" }, cb));
      assert.equal(res.status, HealthCheckResponse_ServingStatus.SERVING);
      h.close();
    });

    it("refuses a client with another certificate", async () => {
      const stranger: Identity = await generateIdentity();
      const h = new HealthClient(p.target, clientCredentials(stranger, derToPem(p.hs.serverCert!), p.hs.serverCert!), tlsChannelOptions);
      await assert.rejects(unary((cb) => h.check({ service: "plugin" }, new Metadata(), { deadline: Date.now() + 3_000 }, cb)));
      h.close();
    });

    it("configures, and answers UNIMPLEMENTED outside its capabilities", async () => {
      const d = new DeployerClient(p.target, p.creds(), tlsChannelOptions);
      const res = await unary<{ name: string; capabilities: string[] }>((cb) =>
        d.configure({ configJson: Buffer.from("{}"), secretsSessionBrokerId: 0 }, cb),
      );
      assert.ok(res.name.length > 0);
      for (const c of res.capabilities) assert.ok((allCapabilities as readonly string[]).includes(c), `unknown capability ${c}`);
      if (!res.capabilities.includes("slots")) {
        await assert.rejects(
          unary((cb) =>
            d.prepareSlots(
              {
                deploymentId: "x",
                tenant: "",
                application: "",
                environment: "",
                artifact: undefined,
                targets: [],
                params: {},
                secretsBrokerId: 0,
                parallelism: 1,
                traffic: {},
                rollout: undefined,
                secretsCallToken: "",
              },
              cb,
            ),
          ),
          (err: ServiceError) => err.code === status.UNIMPLEMENTED,
        );
      }
      const bare = {
        deploymentId: "x",
        tenant: "",
        application: "",
        environment: "",
        artifact: { type: "file", name: "x", version: "1.0.0", source: "/dev/null", sha256: "", path: "" },
        targets: [{ host: "a", port: 0, labels: {}, name: "a" }],
        params: {},
        secretsBrokerId: 0,
        parallelism: 1,
        traffic: {},
        rollout: undefined,
        secretsCallToken: "",
      };
      if (!res.capabilities.includes("drift")) {
        // A plugin from before drift: manent shows its targets as "drift unknown".
        await assert.rejects(
          unary((cb) => d.drift(bare, cb)),
          (err: ServiceError) => err.code === status.UNIMPLEMENTED,
        );
      } else {
        // Drift: one TargetDrift per target, named by it, with a known status (it may need params or secrets the probe lacks: then a clean error).
        const drift = await unary<{ targets: { host: string; status: string }[] }>((cb) => d.drift(bare, cb)).catch((err: ServiceError) => {
          assert.notEqual(err.code, status.UNIMPLEMENTED, "declares drift but answers UNIMPLEMENTED");
          return undefined;
        });
        if (drift) {
          assert.deepEqual(
            drift.targets.map((t) => t.host),
            ["a"],
          );
          for (const t of drift.targets) assert.ok(["in_sync", "drifted", "unknown"].includes(t.status), `drift status ${t.status}`);
        }
      }
      d.close();
    });

    it("exits on GRPCController.Shutdown", async () => {
      const c = new GRPCControllerClient(p.target, p.creds(), tlsChannelOptions);
      const exited = once(p.child as ChildProcess, "exit");
      await unary((cb) => c.shutdown({}, cb)).catch(() => {});
      await exited;
      c.close();
    });
  });

  describe("through the manent host", { skip: !sampleChecks && "MANENT_CONFORMANCE_SAMPLE=0" }, () => {
    let plugin: ExternalPlugin;
    let d: Deployer;
    let base: string;
    const logger = recordingLogger();
    before(async () => {
      base = path.join(t.dir, "targets");
      plugin = await ExternalPlugin.activate({ name: "conf", entry: { external: { command } }, baseDir: t.dir, logger });
      d = await plugin.deployer();
    });
    after(() => plugin.close());

    it("declares dry-run, current release, rollback, parallel targets and the percentage-rollout capabilities", async () => {
      assert.deepEqual(
        new Set(await plugin.capabilities()),
        new Set(["dry_run", "current_release", "rollback", "parallel_targets", "slots", "traffic_router", "testers", "scale"]),
      );
    });

    it("deploys on parallel targets with the secret read through the broker", async () => {
      const secrets = mapSecrets({ "deploy-key": "conformance-key" });
      const targets = ["a", "b", "c", "d"].map((host) => ({ host, labels: {} }));
      const res = await d.deploy(request({ targets, params: { base }, secrets, parallelism: 4 }));
      assert.deepEqual(
        res.targets.map((r) => r.status),
        ["deployed", "deployed", "deployed", "deployed"],
      );
      const hash = createHash("sha256").update("conformance-key").digest("hex");
      for (const host of ["a", "b", "c", "d"]) {
        assert.equal((await readFile(path.join(base, host, "current"), "utf8")).trim(), "1.0.0");
        assert.equal((await readFile(path.join(base, host, "key.sha256"), "utf8")).trim(), hash);
      }
    });

    it("accepts the Secrets session offered at Configure, and each call reads its own secret on it", async () => {
      // manent's SDKs accept it (docs/plugin-protocol.md, section 5); a plugin on go-plugin alone
      // declines it and gets a broker id per call (test/interop/tshost-goplugin-only.test.ts).
      const started = await logger.waitFor((e) => e.msg === "external plugin started");
      assert.equal(started.attrs.secrets_session, true, "the plugin answered Configure with secrets_session = true");
      for (const value of ["session-key-1", "session-key-2"]) {
        const res = await d.deploy(
          request({ targets: [{ host: "s", labels: {} }], params: { base }, secrets: mapSecrets({ "deploy-key": value }) }),
        );
        assert.equal(res.targets[0]?.status, "deployed");
        const hash = createHash("sha256").update(value).digest("hex");
        assert.equal((await readFile(path.join(base, "s", "key.sha256"), "utf8")).trim(), hash);
      }
    });

    it("forwards hclog lines with level, message and attributes", async () => {
      const e = await logger.waitFor((e) => e.msg === "target deployed");
      assert.equal(e.level, "info");
      // The plugin's attributes are kept apart from manent's own fields.
      assert.equal(pluginFields(e).version, "1.0.0");
      assert.equal(e.attrs.plugin, "conf");
    });

    it("dry-runs, reads the current release and rolls back", async () => {
      const targets = [{ host: "a", labels: {} }];
      const ext = d as Deployer & Record<string, (r: unknown) => Promise<never>>;
      const dry = (await ext.dryRun!(
        request({ targets, params: { base }, artifact: { type: "file", name: "x", version: "2.0.0", source: "x" } }),
      )) as { targets: { status: string }[] };
      assert.equal(dry.targets[0]!.status, "ready");
      assert.deepEqual(await ext.currentRelease!(request({ targets, params: { base } })), [{ host: "a", version: "1.0.0" }]);
      await ext.rollback!({ ...request({ targets, params: { base } }), releases: [{ host: "a", version: "0.1.0" }] });
      assert.deepEqual(await ext.currentRelease!(request({ targets, params: { base } })), [{ host: "a", version: "0.1.0" }]);
    });

    it("marks a bad param permanent (ABORTED)", async () => {
      await assert.rejects(d.deploy(request({ params: { base: "not/absolute" } })), (err: unknown) => {
        assert.equal(ManentError.from(err).code, Code.Aborted);
        assert.ok(isPermanent(err));
        assert.match(ManentError.from(err).message, /param base/);
        return true;
      });
    });

    it("keeps per-target results of a failed deploy", async () => {
      const targets = ["a", "b"].map((host) => ({ host, labels: {} }));
      await assert.rejects(d.deploy(request({ targets, params: { base, fail_host: "b" } })), (err: unknown) => {
        assert.ok(err instanceof ResultError);
        assert.deepEqual(
          err.result.targets.map((r) => r.status),
          ["deployed", "failed"],
        );
        return true;
      });
    });

    it("propagates cancellation into the plugin", async () => {
      const ac = new AbortController();
      const running = d.deploy(request({ deploymentId: "cancel", params: { base, delay_ms: "60000" }, signal: ac.signal }));
      await logger.waitFor((e) => e.msg === "deploy started" && pluginFields(e).deployment === "cancel");
      const started = Date.now();
      ac.abort();
      await assert.rejects(running, (err: unknown) => ManentError.from(err).code === Code.Canceled);
      assert.ok(Date.now() - started < 5_000);
    });

    it("serves concurrent calls from one process and exits on close", async () => {
      const pid = plugin.endpoint()!.pid;
      const res = await Promise.all(
        Array.from({ length: 10 }, (_, i) => d.deploy(request({ targets: [{ host: `c${i}`, labels: {} }], params: { base } }))),
      );
      assert.ok(res.every((r) => r.targets[0]!.status === "deployed"));
      assert.equal(plugin.endpoint()!.pid, pid);
      await plugin.close();
      assert.ok(await waitGone(pid, 5_000));
      assert.ok(!logger.entries.some((e) => /reserved for the handshake/.test(e.msg)), "the plugin wrote on stdout after the handshake");
    });
  });
});
