import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { credentials, Metadata, Server, type ChannelCredentials } from "@grpc/grpc-js";
import { Code, ManentError, type Deployer } from "../../src/plugin.js";
import { ExternalPlugin } from "../../src/external/host/index.js";
import { HealthClient } from "../../src/external/gen/go-plugin/health.js";
import { SecretsClient, SecretsService } from "../../src/external/gen/deployer.js";
import { Broker } from "../../src/external/protocol/broker.js";
import { clientCredentials, serverCredentials, tlsChannelOptions } from "../../src/external/protocol/credentials.js";
import { generateIdentity } from "../../src/external/protocol/mtls.js";
import { buildFixture, mapSecrets, recordingLogger, request, tempDir } from "./helpers.js";
import { EventEmitter } from "node:events";

describe("isolation of the plugin process", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let plugin: ExternalPlugin;
  let deployer: Deployer;
  const logger = recordingLogger();

  before(async () => {
    t = await tempDir();
    const probe = await buildFixture("probe-plugin", t.dir);
    process.env.MANENT_TEST_HOST_SECRET = "must-not-leak";
    plugin = await ExternalPlugin.activate({
      name: "probe",
      entry: { external: { command: probe, env: { TEAM_VAR: "x" } } },
      baseDir: t.dir,
      logger,
    });
    deployer = await plugin.deployer();
  });
  after(async () => {
    delete process.env.MANENT_TEST_HOST_SECRET;
    await plugin.close();
    await t.cleanup();
  });

  it("gives the plugin only the allowed environment", async () => {
    const res = await deployer.deploy(request({ params: { env: "1" } }));
    const names = res.details!.env!.split(",");
    const allowed = new Set([
      "PATH",
      "HOME",
      "TMPDIR",
      "TZ",
      "LANG",
      "TEAM_VAR",
      "MANENT_PLUGIN",
      "PLUGIN_PROTOCOL_VERSIONS",
      "PLUGIN_MIN_PORT",
      "PLUGIN_MAX_PORT",
      "PLUGIN_CLIENT_CERT",
      "PLUGIN_UNIX_SOCKET_DIR",
    ]);
    assert.deepEqual(
      names.filter((n) => !allowed.has(n)),
      [],
    );
    assert.ok(names.includes("TEAM_VAR") && names.includes("PATH"));
    assert.ok(!names.includes("MANENT_TEST_HOST_SECRET"));
  });

  it("refuses a secret lookup after the call that received it returned", async () => {
    const secrets = mapSecrets({ "deploy-key": "k" });
    const first = await deployer.deploy(request({ params: { secret: "deploy-key", stash: "1" }, secrets }));
    assert.equal(first.details!.secret_len, "1");
    const second = await deployer.deploy(request({ params: { use_stashed: "1" } }));
    assert.match(second.details!.stale!, /^refused: 9 secret deploy-key: the Deploy call has returned/);
    assert.deepEqual(secrets.asked, ["deploy-key"]);
  });

  it("gives calls without deploy context no access to secrets", async () => {
    await assert.rejects(deployer.validate(request({ params: { secret: "deploy-key" } })), (err: unknown) => {
      const e = ManentError.from(err);
      assert.equal(e.code, Code.FailedPrecondition);
      assert.match(e.message, /secret deploy-key: Validate has no access to secrets/);
      return true;
    });
  });

  it("keeps stdout for the handshake: later writes go to the stdio stream, console to stderr", async () => {
    await deployer.deploy(request({ deploymentId: "noisy", params: { stdout: "1", console: "1" } }));
    const out = await logger.waitFor((e) => e.msg === "noise on stdout");
    assert.equal(out.attrs.stream, "stdout");
    const con = await logger.waitFor((e) => e.msg === "console line");
    assert.equal(con.attrs.stream, "stderr");
    assert.ok(!logger.entries.some((e) => /reserved for the handshake/.test(e.msg)));
  });

  it("refuses a client that does not present the host's certificate", async () => {
    const { target } = plugin.endpoint()!;
    const stranger = await generateIdentity();
    const attempts: [string, ChannelCredentials][] = [
      [
        "a stranger's certificate",
        credentials.createSsl(null, Buffer.from(stranger.keyPem), Buffer.from(stranger.certPem), { rejectUnauthorized: false }),
      ],
      ["no certificate", credentials.createSsl(null, null, null, { rejectUnauthorized: false })],
      ["plaintext", credentials.createInsecure()],
    ];
    for (const [what, creds] of attempts) {
      const c = new HealthClient(target, creds, tlsChannelOptions);
      await assert.rejects(
        new Promise((resolve, reject) =>
          c.check({ service: "plugin" }, new Metadata(), { deadline: Date.now() + 3_000 }, (err, res) =>
            err ? reject(err) : resolve(res),
          ),
        ),
        (err: unknown) => typeof (err as { code?: unknown }).code === "number",
        `a client with ${what} reached the plugin`,
      );
      c.close();
    }
    // The host itself still can.
    assert.equal((await deployer.deploy(request({ params: {} }))).plugin, "probe");
  });
});

describe("broker", () => {
  it("closes a brokered service when its call ends: a later dial fails", async () => {
    const t = await tempDir();
    const host = await generateIdentity();
    const plugin = await generateIdentity();
    const hostBroker = new Broker(
      t.dir,
      () => serverCredentials(host, plugin.certPem),
      () => clientCredentials(host, plugin.certPem, plugin.der),
    );
    const pluginBroker = new Broker(
      t.dir,
      () => serverCredentials(plugin, host.certPem),
      () => clientCredentials(plugin, host.certPem, host.der),
    );
    // Wire the two ends of the StartStream with an in-memory pair.
    const [hostEnd, pluginEnd] = streamPair();
    hostBroker.attach(hostEnd as never);
    pluginBroker.attach(pluginEnd as never);
    const id = hostBroker.newId();
    const close = await hostBroker.acceptAndServe(id, (s: Server) =>
      s.addService(SecretsService, { secret: (_c: unknown, cb: (e: null, r: { value: string }) => void) => cb(null, { value: "v" }) }),
    );
    const client = await pluginBroker.dial(id, (target, creds, opts) => new SecretsClient(target, creds, opts));
    try {
      const ask = () =>
        new Promise<string>((resolve, reject) =>
          client.secret({ name: "n", callToken: "" }, new Metadata(), { deadline: Date.now() + 3_000 }, (err, res) =>
            err ? reject(err) : resolve(res.value),
          ),
        );
      assert.equal(await ask(), "v");
      await close();
      await assert.rejects(ask());
    } finally {
      await close();
      client.close();
      await t.cleanup();
    }
  });

  it("times out a dial whose connection info never comes", { timeout: 10_000 }, async () => {
    const id = await generateIdentity();
    const b = new Broker(
      "/tmp",
      () => serverCredentials(id, id.certPem),
      () => clientCredentials(id, id.certPem, id.der),
    );
    b.attach(streamPair()[0] as never);
    await assert.rejects(
      b.dial(7, (target, creds, opts) => new SecretsClient(target, creds, opts)),
      (err: unknown) => ManentError.from(err).code === Code.Unavailable,
    );
  });
});

/** Two connected ends of a fake StartStream: what one writes, the other receives as data. */
function streamPair(): [EventEmitter, EventEmitter] {
  const a = new EventEmitter();
  const b = new EventEmitter();
  Object.assign(a, { write: (m: unknown) => b.emit("data", m), end() {} });
  Object.assign(b, { write: (m: unknown) => a.emit("data", m), end() {} });
  return [a, b];
}
