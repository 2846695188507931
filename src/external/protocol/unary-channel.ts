import http2 from "node:http2";
import tls from "node:tls";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";

/**
 * A lean gRPC client for unary calls, directly over node:http2: one HTTP/2 session per plugin, one
 * stream per call (the 5-byte length-prefixed message, `content-type: application/grpc`,
 * `te: trailers`, `grpc-timeout` from the deadline, cancellation by RST_STREAM CANCEL) and the
 * status read from the trailers. The host's Deployer calls go through it: grpc-js's per-call path
 * (its resolver, load balancer, retry and filter layers, a Metadata per call) cost the round trip
 * about a third more than the call itself (bench/plugin-transport.ts). Streams (broker, stdio)
 * stay on grpc-js. Failures are rejected as grpc-js shaped ServiceErrors (code, details, trailers
 * as Metadata, including `manent-error-bin` and `grpc-status-details-bin`), worded as grpc-js
 * words transport failures, so the one converter (wire-errors.ts) maps both alike.
 */

/** One unary method of a ts-proto `outputServices=grpc-js` service definition. */
export interface UnaryMethod<Req, Res> {
  path: string;
  requestStream: false;
  responseStream: false;
  requestSerialize(value: Req): Buffer;
  responseDeserialize(value: Buffer): Res;
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

export interface UnaryChannelOptions {
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

export class UnaryChannel {
  private session: http2.ClientHttp2Session | undefined;
  private active = 0;
  private closed = false;

  constructor(private readonly o: UnaryChannelOptions) {}

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
    const body = m.requestSerialize(req);
    const frame = Buffer.allocUnsafe(5 + body.length);
    frame[0] = 0;
    frame.writeUInt32BE(body.length, 1);
    body.copy(frame, 5);
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
      const max = this.o.maxReceiveBytes;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let response: http2.IncomingHttpHeaders | undefined;
      let trailers: http2.IncomingHttpHeaders | undefined;
      let streamError: Error | undefined;
      // The frame parser: the 5-byte prefix, then `need` bytes of message.
      const prefix = Buffer.alloc(5);
      let prefixHave = 0;
      let need = -1;
      let parts: Buffer[] = [];
      let partsLen = 0;
      let message: Buffer | undefined;

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
        let at = 0;
        while (!settled && at < chunk.length) {
          if (need < 0) {
            const take = Math.min(5 - prefixHave, chunk.length - at);
            chunk.copy(prefix, prefixHave, at, at + take);
            prefixHave += take;
            at += take;
            if (prefixHave < 5) return;
            if (message !== undefined) return abandon(status.UNIMPLEMENTED, "Too many responses received");
            if (prefix[0] !== 0) return abandon(status.INTERNAL, "Compressed message received without a negotiated grpc-encoding");
            need = prefix.readUInt32BE(1);
            if (need > max) return abandon(status.RESOURCE_EXHAUSTED, `Received message larger than max (${need} vs. ${max})`);
          }
          const take = Math.min(need - partsLen, chunk.length - at);
          if (take > 0) parts.push(at === 0 && take === chunk.length ? chunk : chunk.subarray(at, at + take));
          partsLen += take;
          at += take;
          if (partsLen === need) {
            message = parts.length === 1 ? parts[0]! : Buffer.concat(parts, partsLen);
            parts = [];
            partsLen = 0;
            need = -1;
            prefixHave = 0;
          }
        }
      });
      stream.on("close", () => {
        if (settled) return;
        const s = trailers ? statusOf(trailers) : undefined;
        if (s) {
          if (s.code !== status.OK) return finish(serviceError(s.code, s.details, failureMetadata(trailers!)));
          if (need >= 0 || prefixHave > 0) return finish(serviceError(status.INTERNAL, "Stream ended in the middle of a message"));
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
      stream.end(frame);
    });
  }
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

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}
