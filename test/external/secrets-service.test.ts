import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { readdir } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { credentials, Metadata, type ChannelCredentials } from "@grpc/grpc-js";
import { SecretsClient } from "../../src/external/gen/deployer.js";
import { SecretsService } from "../../src/external/host/secrets-service.js";
import { callSecrets, SecretsSession } from "../../src/external/sdk/call-secrets.js";
import { Broker } from "../../src/external/protocol/broker.js";
import { clientCredentials, serverCredentials, tlsChannelOptions } from "../../src/external/protocol/credentials.js";
import { generateIdentity, type Identity } from "../../src/external/protocol/mtls.js";
import { mapSecrets, tempDir } from "./helpers.js";

/**
 * The host's long-lived Secrets service, seen from the plugin's side of a real broker: each call
 * announces its own address under its broker id, and a connection reads only the secrets of the
 * call whose address it dialled, only while that call runs.
 */
describe("the host's Secrets service", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let host: Identity;
  let plugin: Identity;
  let hostBroker: Broker;
  let pluginBroker: Broker;
  let service: SecretsService;
  const clients: SecretsClient[] = [];

  before(async () => {
    t = await tempDir();
    [host, plugin] = await Promise.all([generateIdentity(), generateIdentity()]);
    hostBroker = new Broker(
      t.dir,
      () => serverCredentials(host, plugin.certPem),
      () => clientCredentials(host, plugin.certPem, plugin.der),
    );
    pluginBroker = new Broker(
      t.dir,
      () => serverCredentials(plugin, host.certPem),
      () => clientCredentials(plugin, host.certPem, host.der),
    );
    const [hostEnd, pluginEnd] = streamPair();
    hostBroker.attach(hostEnd as never);
    pluginBroker.attach(pluginEnd as never);
    service = new SecretsService(hostBroker, t.dir, host, plugin.certPem);
  });
  after(async () => {
    for (const c of clients) c.close();
    await service.dispose();
    await t.cleanup();
  });

  /** Dials the address announced for `id`, as the plugin does; also returns that address. */
  const connect = async (id: number): Promise<{ client: SecretsClient; target: string }> => {
    let target = "";
    const client = await pluginBroker.dial(id, (t, creds, opts) => new SecretsClient((target = t), creds, opts));
    clients.push(client);
    return { client, target };
  };
  const dial = async (id: number) => (await connect(id)).client;
  const ask = (c: SecretsClient, name: string) =>
    new Promise<string>((resolve, reject) =>
      c.secret({ name, callToken: "" }, new Metadata(), { deadline: Date.now() + 5_000 }, (err, res) =>
        err ? reject(err) : resolve(res.value),
      ),
    );

  it("gives each of two concurrent calls its own secrets", async () => {
    const a = await service.open(mapSecrets({ key: "a-secret" }), "Deploy");
    const b = await service.open(mapSecrets({ key: "b-secret", only_b: "x" }), "Deploy");
    try {
      assert.notEqual(a.id, b.id);
      const [ca, cb] = await Promise.all([dial(a.id), dial(b.id)]);
      assert.equal(await ask(ca, "key"), "a-secret");
      assert.equal(await ask(cb, "key"), "b-secret");
      await assert.rejects(ask(ca, "only_b"), (err: { code?: number }) => err.code === 5 /* NOT_FOUND */);
    } finally {
      a.close();
      b.close();
    }
  });

  it("refuses a lookup after the call returned, on the open connection and on a new one", async () => {
    const call = await service.open(mapSecrets({ key: "v" }), "Deploy");
    const { client: c, target } = await connect(call.id);
    assert.equal(await ask(c, "key"), "v");
    call.close();
    await assert.rejects(ask(c, "key"));
    const late = new SecretsClient(target, clientCredentials(plugin, host.certPem, host.der), tlsChannelOptions);
    clients.push(late);
    await assert.rejects(ask(late, "key"));
  });

  it("refuses a client without the plugin's certificate", async () => {
    const call = await service.open(mapSecrets({ key: "v" }), "Deploy");
    const { target } = await connect(call.id);
    try {
      const stranger = await generateIdentity();
      const attempts: [string, ChannelCredentials][] = [
        ["a stranger's certificate", clientCredentials(stranger, host.certPem, host.der)],
        ["no certificate", credentials.createSsl(Buffer.from(host.certPem), null, null, { checkServerIdentity: () => undefined })],
        ["plaintext", credentials.createInsecure()],
      ];
      for (const [what, creds] of attempts) {
        const c = new SecretsClient(target, creds, tlsChannelOptions);
        clients.push(c);
        await assert.rejects(
          ask(c, "key"),
          (err: { code?: unknown }) => typeof err.code === "number",
          `a client with ${what} read a secret`,
        );
      }
    } finally {
      call.close();
    }
  });

  it("leaves no socket behind once closed", async () => {
    const call = await service.open(mapSecrets({}), "Deploy");
    call.close();
    await service.dispose();
    assert.deepEqual(await readdir(t.dir), []);
    await assert.rejects(service.open(mapSecrets({}), "Deploy"));
  });
});

/**
 * The Secrets session (docs/plugin-protocol.md, section 5) between the host's service and the
 * plugin SDK's side: one ConnInfo for the process, one connection, calls told apart by token.
 */
describe("the host's Secrets session", () => {
  let t: { dir: string; cleanup(): Promise<void> };
  let host: Identity;
  let plugin: Identity;
  let hostBroker: Broker;
  let pluginBroker: Broker;
  let service: SecretsService;
  let announced: number[];

  before(async () => {
    t = await tempDir();
    [host, plugin] = await Promise.all([generateIdentity(), generateIdentity()]);
    hostBroker = new Broker(
      t.dir,
      () => serverCredentials(host, plugin.certPem),
      () => clientCredentials(host, plugin.certPem, plugin.der),
    );
    pluginBroker = new Broker(
      t.dir,
      () => serverCredentials(plugin, host.certPem),
      () => clientCredentials(plugin, host.certPem, host.der),
    );
    const [hostEnd, pluginEnd] = streamPair();
    announced = [];
    const write = (hostEnd as unknown as { write(m: { serviceId: number }): void }).write;
    Object.assign(hostEnd, {
      write: (m: { serviceId: number }) => {
        announced.push(m.serviceId);
        write(m);
      },
    });
    hostBroker.attach(hostEnd as never);
    pluginBroker.attach(pluginEnd as never);
    service = new SecretsService(hostBroker, t.dir, host, plugin.certPem);
  });
  after(async () => {
    await service.dispose();
    await t.cleanup();
  });

  it("declined: no ConnInfo for the offered id, and a broker id per call as before", async () => {
    const other = new SecretsService(hostBroker, t.dir, host, plugin.certPem);
    try {
      const offered = hostBroker.newId();
      await other.startSession(other.prepareSession(), offered, false);
      const call = await other.open(mapSecrets({ key: "v" }), "Deploy");
      call.close();
      assert.equal(call.token, "");
      assert.notEqual(call.id, offered);
      assert.deepEqual(announced, [call.id], "only the call's own broker id was announced");
    } finally {
      await other.dispose();
      announced.length = 0;
    }
  });

  it("serves two calls on one connection, each its own secrets, and refuses a lookup once its call returned", async () => {
    const id = hostBroker.newId();
    const sdk = new SecretsSession(pluginBroker);
    const prepared = service.prepareSession();
    assert.equal(sdk.accept(id), true);
    await service.startSession(prepared, id, true);
    const a = await service.open(mapSecrets({ key: "a-secret" }), "Deploy");
    const b = await service.open(mapSecrets({ key: "b-secret" }), "Deploy");
    assert.equal(a.id, id);
    assert.equal(b.id, id);
    assert.notEqual(a.token, b.token);
    const inA = callSecrets(pluginBroker, sdk, a.id, a.token, "Deploy");
    const inB = callSecrets(pluginBroker, sdk, b.id, b.token, "Deploy");
    assert.equal(await inA.secrets.secret("key"), "a-secret");
    assert.equal(await inB.secrets.secret("key"), "b-secret");
    assert.equal(await inA.secrets.secret("key"), "a-secret");
    await assert.rejects(inA.secrets.secret("missing"), (err: { code?: number }) => err.code === 5);
    assert.deepEqual(announced, [id], "one ConnInfo for the whole session");

    // The call returns: its token reads nothing any more, asked on the very same connection.
    a.close();
    inA.end();
    const raw = await sdk.connected("Deploy", "key");
    const rawAsk = (token: string) =>
      new Promise<string>((resolve, reject) =>
        raw.secret({ name: "key", callToken: token }, new Metadata(), { deadline: Date.now() + 5_000 }, (err, res) =>
          err ? reject(err) : resolve(res.value),
        ),
      );
    await assert.rejects(rawAsk(a.token), (err: { code?: number }) => err.code === 9, "a late lookup is FAILED_PRECONDITION");
    await assert.rejects(rawAsk("not-a-token"), (err: { code?: number }) => err.code === 9);
    await assert.rejects(rawAsk(""), (err: { code?: number }) => err.code === 9);
    await assert.rejects(inA.secrets.secret("key"), (err: { code?: number }) => err.code === 9);
    // The other call still reads its own on the same connection.
    assert.equal(await rawAsk(b.token), "b-secret");
    b.close();
    inB.end();
    await assert.rejects(rawAsk(b.token));
    assert.deepEqual(announced, [id]);
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
