// The host's unary gRPC client (src/external/protocol/unary-channel.ts) against a real gRPC
// server (grpc-js, as the TypeScript SDK serves plugins) over a unix socket with go-plugin's
// AutoMTLS: the answers a misbehaving or hostile plugin can give, which the sample plugins never
// give, and the error model they map into (wire-errors.ts, as the host's call runner uses it).
import assert from "node:assert/strict";
import path from "node:path";
import { createSecureContext } from "node:tls";
import { after, before, describe, it } from "node:test";
import { Server, status, type sendUnaryData, type ServerUnaryCall, type ServiceError } from "@grpc/grpc-js";
import { Code, ManentError } from "../../src/plugin.js";
import { ResultError } from "../../src/core/contract/result-error.js";
import { TargetStatus } from "../../src/core/contract/types.js";
import { DeployerService, DeployRequest, type DeployerServer, type DeployResponse } from "../../src/external/gen/deployer.js";
import { serverCredentials } from "../../src/external/protocol/credentials.js";
import { generateIdentity, type Identity } from "../../src/external/protocol/mtls.js";
import { H2Channel, type UnaryClient } from "../../src/external/protocol/h2-channel.js";
import { fromServiceError, isTransportLoss, toStatus } from "../../src/external/protocol/wire-errors.js";
import { tempDir } from "./helpers.js";

const maxReceiveBytes = 4096;

/** A call the server holds unanswered: its deadline as the server saw it, and its cancellation. */
interface Held {
  deadline: Date | number;
  cancelled: Promise<void>;
}

describe("the host's gRPC client on node:http2", () => {
  let tmp: { dir: string; cleanup(): Promise<void> };
  let host: Identity;
  let plugin: Identity;
  let server: Server;
  let socket: string;
  const held: Held[] = [];
  let heldWaiter: ((h: Held) => void) | undefined;
  const channels: H2Channel[] = [];

  const deploy = (call: ServerUnaryCall<DeployRequest, DeployResponse>, cb: sendUnaryData<DeployResponse>) => {
    const id = call.request.deploymentId;
    if (id === "ok") return cb(null, { plugin: "p", targets: [], details: { echo: call.request.tenant } });
    // An answer larger than the client accepts: refused from its length prefix.
    if (id === "big") return cb(null, { plugin: "p", targets: [], details: { pad: "x".repeat(maxReceiveBytes * 2) } });
    if (id === "fail") {
      const e = new ManentError(Code.InvalidArgument, "param replicas must be a number", { details: { param: "replicas" } });
      return cb(
        toStatus(new ResultError(e, { plugin: "p", targets: [{ host: "a", status: TargetStatus.Failed, error: "no" }], details: {} })),
      );
    }
    if (id === "echo") return cb(null, { plugin: "p", targets: [], details: { pad: call.request.params.pad ?? "" } });
    if (id === "bare") return cb({ code: status.FAILED_PRECONDITION, details: "not ready: 50% done" });
    // Held: never answered; the test cancels it, lets its deadline pass or drops the server.
    const h: Held = {
      deadline: call.getDeadline(),
      cancelled: new Promise((resolve) => call.once("cancelled", () => resolve())),
    };
    held.push(h);
    heldWaiter?.(h);
  };
  const nextHeld = () => new Promise<Held>((resolve) => (heldWaiter = resolve));

  async function startServer(): Promise<void> {
    // Like go-plugin's server: no 4 MiB cap on what the host sends.
    server = new Server({ "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
    server.addService(DeployerService, { deploy } as unknown as DeployerServer);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${socket}`, serverCredentials(plugin, host.certPem), (err) => (err ? reject(err) : resolve())),
    );
  }

  function client(serverDer = plugin.der, max = maxReceiveBytes): { channel: H2Channel; deployer: UnaryClient<typeof DeployerService> } {
    const channel = new H2Channel({
      network: "unix",
      address: socket,
      secureContext: createSecureContext({ ca: plugin.certPem, cert: host.certPem, key: host.keyPem }),
      serverDer,
      maxReceiveBytes: max,
    });
    channels.push(channel);
    return { channel, deployer: channel.client(DeployerService) };
  }

  const req = (deploymentId: string): DeployRequest => DeployRequest.fromPartial({ deploymentId, tenant: "t" });

  /** The call's rejection as a grpc-js ServiceError. */
  async function failure(p: Promise<unknown>): Promise<ServiceError> {
    try {
      await p;
    } catch (err) {
      return err as ServiceError;
    }
    assert.fail("the call succeeded");
  }

  before(async () => {
    tmp = await tempDir();
    socket = path.join(tmp.dir, "plugin.sock");
    [host, plugin] = await Promise.all([generateIdentity(), generateIdentity()]);
    await startServer();
  });
  after(async () => {
    for (const c of channels) c.close();
    server.forceShutdown();
    await tmp.cleanup();
  });

  it("answers a call over mTLS with the plugin's pinned certificate, and many at once on one connection", async () => {
    const { channel, deployer } = client();
    await channel.ready();
    assert.deepEqual((await deployer.deploy(req("ok"))).details, { echo: "t" });
    const all = await Promise.all(Array.from({ length: 20 }, () => deployer.deploy(req("ok"))));
    assert.equal(all.length, 20);
  });

  it("connects over TCP to 127.0.0.1:port when the handshake says tcp", async () => {
    const tcp = new Server();
    tcp.addService(DeployerService, { deploy } as unknown as DeployerServer);
    const port = await new Promise<number>((resolve, reject) =>
      tcp.bindAsync("127.0.0.1:0", serverCredentials(plugin, host.certPem), (err, p) => (err ? reject(err) : resolve(p))),
    );
    try {
      const channel = new H2Channel({
        network: "tcp",
        address: `127.0.0.1:${port}`,
        secureContext: createSecureContext({ ca: plugin.certPem, cert: host.certPem, key: host.keyPem }),
        serverDer: plugin.der,
        maxReceiveBytes,
      });
      channels.push(channel);
      assert.deepEqual((await channel.client(DeployerService).deploy(req("ok"))).details, { echo: "t" });
    } finally {
      tcp.forceShutdown();
    }
  });

  it("carries a 20 MB request and its 20 MB answer, several at once, within a larger limit", async () => {
    const { deployer } = client(plugin.der, 64 * 1024 * 1024);
    const pad = "y".repeat(20 * 1024 * 1024);
    const answers = await Promise.all(
      [1, 2, 3].map(() => deployer.deploy(DeployRequest.fromPartial({ deploymentId: "echo", params: { pad } }))),
    );
    for (const a of answers) assert.equal(a.details.pad?.length, pad.length);
  });

  it("refuses a server that presents another certificate than the handshake announced", async () => {
    const other = await generateIdentity();
    const { channel, deployer } = client(other.der);
    await assert.rejects(channel.ready(), /not the one announced in the handshake/);
    const err = await failure(deployer.deploy(req("ok")));
    assert.equal(err.code, status.UNAVAILABLE);
    assert.ok(isTransportLoss(err), err.details);
  });

  it("refuses an answer larger than the limit from its length prefix, and the connection still serves", async () => {
    const { deployer } = client();
    const err = await failure(deployer.deploy(req("big")));
    assert.equal(err.code, status.RESOURCE_EXHAUSTED);
    assert.match(err.details, /Received message larger than max \(\d+ vs\. 4096\)/);
    assert.equal(fromServiceError(err, "p", "Deploy").code, Code.ResourceExhausted);
    assert.deepEqual((await deployer.deploy(req("ok"))).details, { echo: "t" });
  });

  it("maps a failure with manent-error-bin into the same error as grpc-js did: code, message, details, partial results", async () => {
    const { deployer } = client();
    const e = fromServiceError(await failure(deployer.deploy(req("fail"))), "p", "Deploy");
    assert.ok(e instanceof ResultError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.equal(e.message, "param replicas must be a number");
    assert.deepEqual(e.details, { param: "replicas", plugin: "p" });
    assert.equal(e.result.targets[0]?.host, "a");
  });

  it("keeps a bare status's code and its percent-encoded message, and reports a method the plugin lacks as unimplemented", async () => {
    const { deployer } = client();
    const bare = await failure(deployer.deploy(req("bare")));
    assert.equal(bare.code, status.FAILED_PRECONDITION);
    assert.equal(bare.details, "not ready: 50% done");
    const e = fromServiceError(await failure(deployer.drift(req("ok"))), "p", "Drift");
    assert.equal(e.code, Code.Unimplemented);
    assert.match(e.message, /plugin p does not implement Drift/);
  });

  it("sends the deadline as grpc-timeout and, when it passes, fails DEADLINE_EXCEEDED and cancels the plugin's call", async () => {
    const { deployer } = client();
    const seen = nextHeld();
    const deadline = Date.now() + 500;
    const call = failure(deployer.deploy(req("hold"), { deadline }));
    const h = await seen;
    const serverDeadline = h.deadline instanceof Date ? h.deadline.getTime() : h.deadline;
    // The server's deadline is its receipt time plus grpc-timeout: not before ours, later by the transit time only (none sent: Infinity).
    assert.ok(serverDeadline >= deadline - 2 && serverDeadline < deadline + 5_000, `server deadline ${serverDeadline} vs ${deadline}`);
    const err = await call;
    assert.equal(err.code, status.DEADLINE_EXCEEDED);
    await h.cancelled;
  });

  it("cancels the call on the plugin when its signal aborts", async () => {
    const { deployer } = client();
    const seen = nextHeld();
    const ac = new AbortController();
    const call = failure(deployer.deploy(req("hold"), { signal: ac.signal }));
    const h = await seen;
    ac.abort();
    assert.equal((await call).code, status.CANCELLED);
    await h.cancelled;
  });

  it("fails a call in flight as a lost connection when the plugin's server goes away, then reconnects to a new one", async () => {
    const { deployer } = client();
    const seen = nextHeld();
    const call = failure(deployer.deploy(req("hold")));
    await seen;
    server.forceShutdown();
    const err = await call;
    assert.ok(isTransportLoss(err), `${err.code} ${err.details}`);
    // grpc-js's server resets its streams (CANCEL) before it closes: a lost transport either way,
    // which the host's call runner reports as UNAVAILABLE once it sees the process gone (supervision.test.ts).
    assert.ok([status.CANCELLED, status.UNAVAILABLE].includes(err.code), `${err.code} ${err.details}`);
    await startServer();
    assert.deepEqual((await deployer.deploy(req("ok"))).details, { echo: "t" });
  });
});
