import { randomBytes, randomUUID, X509Certificate } from "node:crypto";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { Code, ManentError } from "../../core/errors.js";
import type { SecretsAccessor } from "../../core/contract/types.js";
import { SecretsService as SecretsServiceDefinition, type SecretRequest, type SecretResponse } from "../gen/deployer.js";
import type { Broker } from "../protocol/broker.js";
import type { Identity } from "../protocol/mtls.js";
import { toStatus } from "../protocol/wire-errors.js";

/**
 * The host's TLS context, built once per identity (a server's plugins share one): it holds only
 * the host's key and certificate. The plugin's certificate is checked on each connection
 * ({@link SecretsService.trusted}), so the context does not depend on the plugin process.
 */
const contexts = new WeakMap<Identity, tls.SecureContext>();
function hostContext(identity: Identity): tls.SecureContext {
  let c = contexts.get(identity);
  if (!c) {
    c = tls.createSecureContext({ key: identity.keyPem, cert: identity.certPem });
    contexts.set(identity, c);
  }
  return c;
}

/** What identifies a call's connections to the shared server (see {@link SecretsService}). */
const TAG_PREFIX = "manent-secrets-call:";
/** The token of the session endpoint: its connections name their call in each request. */
const SESSION = "session";

/** A call served on the session: what its token reads, until the call returns. */
interface SessionCall {
  secrets: SecretsAccessor;
  call: string;
}

/** One call's endpoint: a socket of its own, announced under the call's broker id only. */
export interface Endpoint {
  token: string;
  address: string;
  listener: net.Server;
  sockets: Set<net.Socket>;
  secrets: SecretsAccessor | undefined;
  call: string;
}

/**
 * The host's Secrets service on the go-plugin broker, one per plugin process.
 *
 * The wire is go-plugin's: every call with the deploy context gets a fresh broker id N, announced
 * with `ConnInfo{N, unix, address}`, and the plugin dials that address (a new connection per call,
 * as go-plugin's `GRPCBroker.Dial` does). What the plugin presents is the address it was given for
 * N, so that address is the call's credential: a fresh unguessable socket path in the process's
 * private directory, accepted only while the call runs.
 *
 * What is per call is only that listening socket (a bind, no TLS context, no gRPC server): one
 * long-lived gRPC server answers every call. TLS (the AutoMTLS pair, roles swapped: the host's
 * certificate serves, the plugin's is required) is terminated here with one secure context, and
 * each connection is handed to the gRPC server tagged with its call, so a lookup reads exactly the
 * secrets of the call whose address was dialled. When the call returns, its socket stops
 * accepting, its connections are cut and a lookup still in flight is refused.
 *
 * A plugin that accepted the Secrets session at Configure (manent's SDKs) is served differently:
 * one endpoint for the process's life, announced once under the session's broker id, which the
 * plugin dials once and keeps. Each call gets an unguessable token instead of an address; a lookup
 * on the session names its call's token and is answered only while that call runs. Per call
 * that is a map entry: no socket, no ConnInfo, no TLS handshake.
 */
export class SecretsService {
  private readonly server = new Server({ "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
  private readonly injector;
  private readonly secureContext: tls.SecureContext;
  private readonly pluginCert: X509Certificate;
  private readonly endpoints = new Map<string, Endpoint>();
  private spare: Promise<Endpoint> | undefined;
  private disposed = false;
  /** The session's broker id once the plugin accepted it; its calls by token. */
  private sessionId = 0;
  private readonly calls = new Map<string, SessionCall>();

  constructor(
    private readonly broker: Broker,
    private readonly socketDir: string,
    identity: Identity,
    pluginCertPem: string,
  ) {
    this.pluginCert = new X509Certificate(pluginCertPem);
    this.secureContext = hostContext(identity);
    this.server.addService(SecretsServiceDefinition, {
      secret: (c: ServerUnaryCall<SecretRequest, SecretResponse>, cb: sendUnaryData<SecretResponse>) => this.answer(c, cb),
    });
    // TLS is already terminated on the injected sockets: plaintext HTTP/2 inside it.
    this.injector = this.server.createConnectionInjector(ServerCredentials.createInsecure());
  }

  /**
   * Binds the session's endpoint ahead of Configure (so accepting it costs the start no socket
   * set-up); {@link startSession} announces it if the plugin accepts, else it is closed.
   */
  prepareSession(): Promise<Endpoint> {
    return this.listen(SESSION);
  }

  /**
   * The plugin accepted the session offered under `id`: announces the endpoint once (the plugin
   * dials it at once) and serves every later call on it. Not accepted: the endpoint is closed, and
   * no ConnInfo is ever sent for `id`.
   */
  async startSession(prepared: Promise<Endpoint>, id: number, accepted: boolean): Promise<void> {
    const ep = await prepared;
    if (!accepted) return this.end(ep);
    ep.call = "session";
    this.broker.announce(id, ep.address);
    this.sessionId = id;
  }

  /**
   * Serves `secrets` for one call: on the session with a fresh token, else on a fresh broker id;
   * `close` ends it (later lookups fail at once).
   */
  async open(secrets: SecretsAccessor, call: string): Promise<{ id: number; token: string; close(): void }> {
    if (this.sessionId) {
      if (this.disposed) throw new ManentError(Code.Unavailable, "the plugin's Secrets service is closed");
      // 122 random bits from Node's entropy cache: unguessable, and cheaper than randomBytes per call.
      const token = randomUUID();
      this.calls.set(token, { secrets, call });
      return { id: this.sessionId, token, close: () => this.calls.delete(token) };
    }
    const next = this.spare ?? this.listen();
    this.spare = this.listen();
    this.spare.catch(() => (this.spare = undefined));
    const ep = await next;
    ep.secrets = secrets;
    ep.call = call;
    const id = this.broker.newId();
    try {
      this.broker.announce(id, ep.address);
    } catch (err) {
      this.end(ep);
      throw err;
    }
    return {
      id,
      token: "",
      close: () => {
        this.broker.forget(id);
        this.end(ep);
      },
    };
  }

  /** Stops everything (the process is going away). */
  async dispose(): Promise<void> {
    this.disposed = true;
    const spare = this.spare;
    this.spare = undefined;
    await spare?.then((ep) => this.end(ep)).catch(() => {});
    for (const ep of this.endpoints.values()) this.end(ep);
    this.calls.clear();
    this.injector.destroy();
    this.server.forceShutdown();
  }

  private answer(c: ServerUnaryCall<SecretRequest, SecretResponse>, cb: sendUnaryData<SecretResponse>): void {
    const peer = c.getPeer();
    const token = peer.startsWith(TAG_PREFIX) ? peer.slice(TAG_PREFIX.length) : "";
    if (token === SESSION) return this.answerSession(c, cb);
    const ep = this.endpoints.get(token);
    const secrets = ep?.secrets;
    if (!secrets) {
      cb(toStatus(new ManentError(Code.FailedPrecondition, `secret ${c.request.name}: the call that could read it has returned`)));
      return;
    }
    secrets.secret(c.request.name).then(
      (value) => {
        // The call may have returned while the accessor was looking: its value is not given out.
        if (ep.secrets === secrets) cb(null, { value });
        else cb(toStatus(new ManentError(Code.FailedPrecondition, `secret ${c.request.name}: the ${ep.call} call has returned`)));
      },
      (err: unknown) => cb(toStatus(err)),
    );
  }

  /** A lookup on the session: answered for a call still running, named by its token. */
  private answerSession(c: ServerUnaryCall<SecretRequest, SecretResponse>, cb: sendUnaryData<SecretResponse>): void {
    const running = this.calls.get(c.request.callToken);
    if (!running) {
      cb(toStatus(new ManentError(Code.FailedPrecondition, `secret ${c.request.name}: the call that could read it has returned`)));
      return;
    }
    running.secrets.secret(c.request.name).then(
      (value) => {
        if (this.calls.get(c.request.callToken) === running) cb(null, { value });
        else cb(toStatus(new ManentError(Code.FailedPrecondition, `secret ${c.request.name}: the ${running.call} call has returned`)));
      },
      (err: unknown) => cb(toStatus(err)),
    );
  }

  /** Binds a fresh socket for the next call; it accepts connections only while it is in `endpoints`. */
  private listen(name?: string): Promise<Endpoint> {
    if (this.disposed) return Promise.reject(new ManentError(Code.Unavailable, "the plugin's Secrets service is closed"));
    const file = randomBytes(12).toString("hex");
    const token = name ?? file;
    const address = path.join(this.socketDir, `s-${file}.sock`);
    const ep: Endpoint = { token, address, listener: net.createServer(), sockets: new Set(), secrets: undefined, call: "" };
    ep.listener.on("connection", (raw) => this.accept(ep, raw));
    return new Promise((resolve, reject) => {
      ep.listener.once("error", reject);
      ep.listener.listen(address, () => {
        ep.listener.off("error", reject);
        ep.listener.on("error", () => {});
        this.endpoints.set(token, ep);
        resolve(ep);
      });
    });
  }

  private accept(ep: Endpoint, raw: net.Socket): void {
    if (!this.endpoints.has(ep.token)) {
      raw.destroy();
      return;
    }
    const sock = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: this.secureContext,
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ["h2"],
    });
    ep.sockets.add(sock);
    sock.once("close", () => ep.sockets.delete(sock));
    sock.on("error", () => sock.destroy());
    sock.once("secure", () => {
      if (!this.endpoints.has(ep.token) || !this.trusted(sock)) {
        sock.destroy();
        return;
      }
      // gRPC reports a connection's peer as its socket's remoteAddress (a unix socket has none):
      // the tag ties every stream of this connection to the call that announced the address.
      Object.defineProperty(sock, "remoteAddress", { value: TAG_PREFIX + ep.token });
      // A tls.Server clears this flag once it has verified the peer; this socket was verified
      // above. HTTP/2 waits for a socket still "secureConnecting" to connect, which a server-side
      // socket never does.
      (sock as { secureConnecting?: boolean }).secureConnecting = false;
      this.injector.injectConnection(sock);
    });
  }

  /**
   * The client must present the plugin's certificate (or one it issued), as go-plugin's
   * RequireAndVerifyClientCert with the plugin's certificate as the only CA; HTTP/2 negotiated.
   */
  private trusted(sock: tls.TLSSocket): boolean {
    const peer = sock.getPeerX509Certificate();
    if (!peer || sock.alpnProtocol !== "h2") return false;
    if (peer.raw.equals(this.pluginCert.raw)) return true;
    return peer.checkIssued(this.pluginCert) && peer.verify(this.pluginCert.publicKey) && this.pluginCert.ca;
  }

  private end(ep: Endpoint): void {
    ep.secrets = undefined;
    if (!this.endpoints.delete(ep.token)) return;
    // close() also removes the socket file.
    ep.listener.close();
    for (const s of ep.sockets) s.destroy();
    ep.sockets.clear();
  }
}
