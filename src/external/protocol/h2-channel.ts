import { EventEmitter } from "node:events";
import http2 from "node:http2";
import tls from "node:tls";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";

/**
 * The host's lean gRPC client, directly over node:http2: one HTTP/2 session per plugin (over the
 * handshake's unix socket or 127.0.0.1 port, with go-plugin's AutoMTLS), one stream per call (the
 * 5-byte length-prefixed message, `content-type: application/grpc`, `te: trailers`, `grpc-timeout`
 * from the deadline, cancellation by RST_STREAM CANCEL) and the status read from the trailers.
 * The host's unary calls (Deployer, health, controller) and its two streams (the broker's
 * StartStream, StreamStdio) go through it: grpc-js's per-call path (its resolver, load balancer,
 * retry and filter layers, a Metadata per call) cost the round trip about half as much again as
 * the call itself (bench/plugin-transport.ts). Failures are rejected as grpc-js shaped
 * ServiceErrors (code, details, trailers as Metadata, including `manent-error-bin` and
 * `grpc-status-details-bin`), worded as grpc-js words transport failures, so the one converter
 * (wire-errors.ts) maps both alike. The host's own servers (the Secrets service on the broker)
 * stay on grpc-js.
 */

/** One method of a ts-proto `outputServices=grpc-js` service definition. */
export interface Method<Req, Res> {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  requestSerialize(value: Req): Buffer;
  responseDeserialize(value: Buffer): Res;
}

export interface UnaryMethod<Req, Res> extends Method<Req, Res> {
  requestStream: false;
  responseStream: false;
}

/**
 * A streaming call: `data` for each message, then `end` (status OK) or `error` (a ServiceError);
 * `write` sends a message, `end` half-closes, `cancel` resets the stream.
 */
export interface ClientStream<Req, Res> {
  on(event: "data", listener: (message: Res) => void): this;
  on(event: "error", listener: (err: ServiceError) => void): this;
  on(event: "end", listener: () => void): this;
  write(message: Req): void;
  end(): void;
  cancel(): void;
}

export interface CallOptions {
  /** Absolute deadline (ms since the epoch): sent as `grpc-timeout`, enforced here too. */
  deadline?: number;
  /** Aborting cancels the call (RST_STREAM CANCEL): it fails with CANCELLED. */
  signal?: AbortSignal;
}

export type UnaryCall<Req, Res> = (req: Req, opts?: CallOptions) => Promise<Res>;

/** The unary methods of a service definition as promise-returning calls on one channel. */
export type UnaryClient<S> = { [K in keyof S]: S[K] extends UnaryMethod<infer Req, infer Res> ? UnaryCall<Req, Res> : never };

export interface H2ChannelOptions {
  /** From the go-plugin handshake: `unix` (a socket path) or `tcp` (`127.0.0.1:port`). */
  network: "unix" | "tcp";
  address: string;
  /** Our certificate and key, and the plugin's certificate as the only CA (AutoMTLS). */
  secureContext: tls.SecureContext;
  /** The DER the handshake announced: the server must present exactly this certificate. */
  serverDer: Buffer;
  /**
   * The largest response message accepted. A plugin's answer is untrusted input: a larger length
   * prefix fails the call with RESOURCE_EXHAUSTED before any of it is buffered.
   */
  maxReceiveBytes: number;
}

/** Largest Deployer answer the host accepts from a plugin (a 20,000-target result is a few MB). */
export const MAX_PLUGIN_MESSAGE_BYTES = 256 * 1024 * 1024;

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_INADEQUATE_SECURITY } =
  http2.constants;

export class H2Channel {
  private session: http2.ClientHttp2Session | undefined;
  private active = 0;
  private closed = false;

  constructor(private readonly o: H2ChannelOptions) {}

  /**
   * Connects (TLS with the pinned certificate, HTTP/2 settings exchanged) and resolves once the
   * connection is up; rejects with why it is not (refused, certificate mismatch, closed).
   */
  ready(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("channel closed by the host"));
    const session = this.current();
    if (!session.connecting) return Promise.resolve();
    return new Promise((resolve, reject) => {
      let failure: Error | undefined;
      const onError = (err: Error) => (failure = err);
      session.on("error", onError);
      session.once("connect", () => {
        session.off("error", onError);
        resolve();
      });
      session.once("close", () => reject(failure ?? new Error("connection closed before it was established")));
    });
  }

  /** The unary methods of `service` on this channel. */
  client<S extends Record<string, unknown>>(service: S): UnaryClient<S> {
    const out: Record<string, unknown> = {};
    for (const [key, m] of Object.entries(service)) {
      const method = m as UnaryMethod<unknown, unknown>;
      if (method.requestStream || method.responseStream) continue;
      out[key] = (req: unknown, opts?: CallOptions) => this.call(method, req, opts);
    }
    return out as UnaryClient<S>;
  }

  /**
   * Opens a streaming call (no deadline: it lives as long as the plugin). It does not keep the
   * event loop alive, as the broker's and stdio's streams must not.
   */
  stream<Req, Res>(m: Method<Req, Res>): ClientStream<Req, Res> {
    const out = new StreamCall<Req, Res>(m);
    if (this.closed) {
      queueMicrotask(() => out.fail(serviceError(status.UNAVAILABLE, "Connection dropped (channel closed by the host)")));
      return out;
    }
    const session = this.current();
    const stream = session.request({ ":method": "POST", ":path": m.path, "content-type": "application/grpc", te: "trailers" });
    out.attach(stream, session, this.o.maxReceiveBytes);
    return out;
  }

  /** Closes the connection: calls in flight fail as a dropped connection, later ones at once. */
  close(): void {
    this.closed = true;
    this.session?.destroy();
    this.session = undefined;
  }

  private current(): http2.ClientHttp2Session {
    const have = this.session;
    if (have && !have.closed && !have.destroyed) return have;
    const o = this.o;
    const where = o.network === "unix" ? { path: o.address } : hostPort(o.address);
    const session = http2.connect("https://localhost", {
      createConnection: () =>
        tls.connect({
          ...where,
          secureContext: o.secureContext,
          servername: "localhost",
          ALPNProtocols: ["h2"],
          checkServerIdentity: (_host, cert) =>
            cert.raw.equals(o.serverDer) ? undefined : new Error("plugin server certificate is not the one announced in the handshake"),
        }),
    });
    // A session's failure reaches each of its streams (their close below); nothing else to do here.
    session.on("error", () => {});
    // After GOAWAY or a drop the next call connects anew, as grpc-js reconnects a live plugin.
    const forget = () => {
      if (this.session === session) this.session = undefined;
    };
    session.once("goaway", forget);
    session.once("close", forget);
    if (this.active === 0) session.unref();
    this.session = session;
    return session;
  }

  private call<Req, Res>(m: UnaryMethod<Req, Res>, req: Req, opts: CallOptions = {}): Promise<Res> {
    if (this.closed) return Promise.reject(serviceError(status.UNAVAILABLE, "Connection dropped (channel closed by the host)"));
    if (opts.signal?.aborted) return Promise.reject(serviceError(status.CANCELLED, "Cancelled on client"));
    const timeoutMs = opts.deadline === undefined ? undefined : opts.deadline - Date.now();
    if (timeoutMs !== undefined && timeoutMs <= 0) return Promise.reject(serviceError(status.DEADLINE_EXCEEDED, "Deadline exceeded"));
    const body = frame(m.requestSerialize(req));
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": m.path,
      "content-type": "application/grpc",
      te: "trailers",
    };
    if (timeoutMs !== undefined) headers["grpc-timeout"] = grpcTimeout(timeoutMs);

    return new Promise<Res>((resolve, reject) => {
      const session = this.current();
      if (this.active++ === 0) session.ref();
      const stream = session.request(headers);
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let response: http2.IncomingHttpHeaders | undefined;
      let trailers: http2.IncomingHttpHeaders | undefined;
      let streamError: Error | undefined;
      let message: Buffer | undefined;
      const reader = new FrameReader(this.o.maxReceiveBytes, (msg) => {
        if (message !== undefined) return abandon(status.UNIMPLEMENTED, "Too many responses received");
        message = msg;
      });

      const finish = (err: ServiceError | null, res?: Res) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        if (--this.active === 0 && !session.destroyed) session.unref();
        if (err) reject(err);
        else resolve(res as Res);
      };
      /** Ends the call here (cancel, deadline, a refused answer) and tells the plugin with RST_STREAM CANCEL. */
      const abandon = (code: status, details: string) => {
        finish(serviceError(code, details));
        if (!stream.closed && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
      };
      const onAbort = () => abandon(status.CANCELLED, "Cancelled on client");
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      if (timeoutMs !== undefined) timer = setTimeout(() => abandon(status.DEADLINE_EXCEEDED, "Deadline exceeded"), timeoutMs);

      stream.on("response", (h) => {
        response = h;
        if (h["grpc-status"] !== undefined) trailers = h; // trailers-only: the status is in the headers
      });
      stream.on("trailers", (h) => (trailers = h));
      stream.on("error", (err: Error) => (streamError = err));
      stream.on("data", (chunk: Buffer) => {
        if (settled) return;
        const bad = reader.push(chunk);
        if (bad) abandon(bad.code, bad.details);
      });
      stream.on("close", () => {
        if (settled) return;
        const s = trailers ? statusOf(trailers) : undefined;
        if (s) {
          if (s.code !== status.OK) return finish(serviceError(s.code, s.details, failureMetadata(trailers!)));
          if (reader.partial) return finish(serviceError(status.INTERNAL, "Stream ended in the middle of a message"));
          if (message === undefined) return finish(serviceError(status.UNIMPLEMENTED, "No message received"));
          let res: Res;
          try {
            res = m.responseDeserialize(message);
          } catch (err) {
            return finish(serviceError(status.INTERNAL, `Response message parsing error: ${(err as Error).message}`));
          }
          return finish(null, res);
        }
        finish(noStatus(stream.rstCode, response, streamError, session));
      });
      stream.end(body);
    });
  }
}

/**
 * gRPC's length-prefixed messages from a stream's DATA chunks: the 5-byte prefix (uncompressed
 * flag, big-endian length), then the message. A length over `max` is refused before anything of
 * it is buffered; a compressed message is refused (no encoding is ever negotiated).
 */
class FrameReader {
  private readonly prefix = Buffer.alloc(5);
  private prefixHave = 0;
  private need = -1;
  private parts: Buffer[] = [];
  private partsLen = 0;

  constructor(
    private readonly max: number,
    private readonly onMessage: (message: Buffer) => void,
  ) {}

  /** True while a message has begun and not ended. */
  get partial(): boolean {
    return this.need >= 0 || this.prefixHave > 0;
  }

  /** Feeds one chunk; returns why the stream must end, if it must (then nothing more is read). */
  push(chunk: Buffer): { code: status; details: string } | undefined {
    let at = 0;
    while (at < chunk.length) {
      if (this.need < 0) {
        const take = Math.min(5 - this.prefixHave, chunk.length - at);
        chunk.copy(this.prefix, this.prefixHave, at, at + take);
        this.prefixHave += take;
        at += take;
        if (this.prefixHave < 5) return undefined;
        if (this.prefix[0] !== 0)
          return { code: status.INTERNAL, details: "Compressed message received without a negotiated grpc-encoding" };
        this.need = this.prefix.readUInt32BE(1);
        if (this.need > this.max)
          return { code: status.RESOURCE_EXHAUSTED, details: `Received message larger than max (${this.need} vs. ${this.max})` };
      }
      // An empty message ends here, at its prefix; a longer one when its last byte is in.
      const take = Math.min(this.need - this.partsLen, chunk.length - at);
      if (take > 0) this.parts.push(at === 0 && take === chunk.length ? chunk : chunk.subarray(at, at + take));
      this.partsLen += take;
      at += take;
      if (this.partsLen === this.need) {
        const message = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.partsLen);
        this.parts = [];
        this.partsLen = 0;
        this.need = -1;
        this.prefixHave = 0;
        this.onMessage(message);
      }
    }
    return undefined;
  }
}

/** A streaming call on one HTTP/2 stream (see {@link ClientStream}). */
class StreamCall<Req, Res> extends EventEmitter implements ClientStream<Req, Res> {
  private stream: http2.ClientHttp2Stream | undefined;
  private done = false;

  constructor(private readonly m: Method<Req, Res>) {
    super();
  }

  attach(stream: http2.ClientHttp2Stream, session: http2.ClientHttp2Session, max: number): void {
    this.stream = stream;
    let response: http2.IncomingHttpHeaders | undefined;
    let trailers: http2.IncomingHttpHeaders | undefined;
    let streamError: Error | undefined;
    const reader = new FrameReader(max, (msg) => {
      let decoded: Res;
      try {
        decoded = this.m.responseDeserialize(msg);
      } catch (err) {
        return this.abandon(status.INTERNAL, `Response message parsing error: ${(err as Error).message}`);
      }
      if (!this.done) this.emit("data", decoded);
    });
    stream.on("response", (h) => {
      response = h;
      if (h["grpc-status"] !== undefined) trailers = h;
    });
    stream.on("trailers", (h) => (trailers = h));
    stream.on("error", (err: Error) => (streamError = err));
    stream.on("data", (chunk: Buffer) => {
      if (this.done) return;
      const bad = reader.push(chunk);
      if (bad) this.abandon(bad.code, bad.details);
    });
    stream.on("close", () => {
      if (this.done) return;
      const s = trailers ? statusOf(trailers) : undefined;
      if (s?.code === status.OK && !reader.partial) {
        this.done = true;
        this.emit("end");
      } else if (s) this.fail(serviceError(s.code, s.details, failureMetadata(trailers!)));
      else this.fail(noStatus(stream.rstCode, response, streamError, session));
    });
  }

  write(message: Req): void {
    const s = this.stream;
    if (this.done || !s || s.closed || s.destroyed || !s.writable) return;
    s.write(frame(this.m.requestSerialize(message)));
  }

  end(): void {
    const s = this.stream;
    if (s && !s.closed && !s.destroyed && s.writable) s.end();
  }

  cancel(): void {
    this.abandon(status.CANCELLED, "Cancelled on client");
  }

  /** Ends the call with `err`; an `error` nobody listens for is dropped, not thrown. */
  fail(err: ServiceError): void {
    if (this.done) return;
    this.done = true;
    if (this.listenerCount("error") > 0) this.emit("error", err);
  }

  private abandon(code: status, details: string): void {
    this.fail(serviceError(code, details));
    const s = this.stream;
    if (s && !s.closed && !s.destroyed) s.close(NGHTTP2_CANCEL);
  }
}

/** The 5-byte prefix and the message. */
function frame(body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out[0] = 0;
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

/** grpc-status and grpc-message (percent-encoded); the rest of the trailers matter only to a failure. */
function statusOf(h: http2.IncomingHttpHeaders): { code: status; details: string } | undefined {
  const raw = h["grpc-status"];
  if (typeof raw !== "string") return undefined;
  const n = /^\d{1,2}$/.test(raw) ? Number(raw) : NaN;
  const code = n >= 0 && n <= 16 ? (n as status) : status.UNKNOWN;
  const msg = h["grpc-message"];
  let details = typeof msg === "string" ? msg : "";
  try {
    details = decodeURIComponent(details);
  } catch {
    // Not percent-encoding after all: keep it as sent.
  }
  return { code, details };
}

/** A failure's trailers as grpc-js Metadata (`-bin` values base64-decoded): `manent-error-bin`, `grpc-status-details-bin`. */
function failureMetadata(h: http2.IncomingHttpHeaders): Metadata {
  const metadata = Metadata.fromHttp2Headers(h);
  metadata.remove("grpc-status");
  metadata.remove("grpc-message");
  return metadata;
}

/** A stream that closed without a gRPC status: grpc-js's mapping and wording, which isTransportLoss knows. */
function noStatus(
  rstCode: number | undefined,
  response: http2.IncomingHttpHeaders | undefined,
  streamError: Error | undefined,
  session: http2.ClientHttp2Session,
): ServiceError {
  const httpStatus = Number(response?.[":status"] ?? 0);
  if (response && httpStatus !== 200) return serviceError(httpToGrpc(httpStatus), `Received HTTP status code ${httpStatus}`);
  if (streamError && !(streamError as NodeJS.ErrnoException).code?.startsWith("ERR_HTTP2_STREAM_ERROR"))
    return serviceError(status.UNAVAILABLE, `Connection dropped (${streamError.message})`);
  if (session.destroyed && rstCode !== NGHTTP2_CANCEL) return serviceError(status.UNAVAILABLE, "Connection dropped");
  switch (rstCode) {
    case NGHTTP2_REFUSED_STREAM:
      return serviceError(status.UNAVAILABLE, "Stream refused by server");
    case NGHTTP2_CANCEL:
      return serviceError(status.CANCELLED, "Call cancelled by the server (RST_STREAM CANCEL)");
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return serviceError(status.RESOURCE_EXHAUSTED, "Bandwidth exhausted or memory limit exceeded (RST_STREAM ENHANCE_YOUR_CALM)");
    case NGHTTP2_INADEQUATE_SECURITY:
      return serviceError(status.PERMISSION_DENIED, "Protocol not secure enough (RST_STREAM INADEQUATE_SECURITY)");
    case NGHTTP2_NO_ERROR:
      return serviceError(status.INTERNAL, "Received RST_STREAM with code 0 (Call ended without gRPC status)");
    default:
      return serviceError(status.INTERNAL, `Received RST_STREAM with code ${rstCode}`);
  }
}

/** gRPC's HTTP-to-status mapping (doc/http-grpc-status-mapping.md), as grpc-js applies it. */
function httpToGrpc(httpStatus: number): status {
  switch (httpStatus) {
    case 400:
      return status.INTERNAL;
    case 401:
      return status.UNAUTHENTICATED;
    case 403:
      return status.PERMISSION_DENIED;
    case 404:
      return status.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return status.UNAVAILABLE;
    default:
      return status.UNKNOWN;
  }
}

/** `grpc-timeout`: at most 8 digits and a unit; milliseconds while they fit, then coarser. */
function grpcTimeout(ms: number): string {
  const m = Math.max(1, Math.ceil(ms));
  if (m < 1e8) return `${m}m`;
  const s = Math.ceil(m / 1000);
  if (s < 1e8) return `${s}S`;
  return `${Math.min(99_999_999, Math.ceil(s / 3600))}H`;
}

function serviceError(code: status, details: string, metadata = new Metadata()): ServiceError {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata });
}

/** `127.0.0.1:port` or `[::1]:port` (checked by parseHandshake). */
function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  return { host: address.slice(0, i).replace(/^\[(.*)\]$/, "$1"), port: Number(address.slice(i + 1)) };
}
