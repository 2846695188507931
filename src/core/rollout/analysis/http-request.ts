import type { IncomingMessage } from "node:http";
import type { CheckedHost, Outbound } from "../../artifacts/network.js";
import { Code, ManentError } from "../../errors.js";

/** Largest response body read: an answer the size of a page is a mistake or an attack, not a metric. */
export const maxResponseBytes = 1024 * 1024;

export interface HttpAnswer {
  status: number;
  contentType: string;
  body: string;
}

/** No answer was obtained (refused, reset, timed out, too large): the measurement is inconclusive. */
export class NoAnswerError extends Error {
  override readonly name = "NoAnswerError";
}

/** The server's address rules refuse the check's URL: a retry cannot change that, so the check fails. */
export class AddressRefusedError extends Error {
  override readonly name = "AddressRefusedError";
}

export interface HttpRequest {
  url: string;
  /** The envconfig field that named the URL, for a refusal's message. */
  field: string;
  /**
   * The server's address rules and the request to the address they checked: the envconfig is a
   * tenant's, so its URLs must not reach the server's own network (a cloud's metadata service).
   */
  outbound: Outbound;
  method: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * One HTTP request of a measurement, to the address the rules checked (a name that resolves
 * elsewhere later changes nothing): redirects are not followed (a check names where it goes), the
 * body is read up to {@link maxResponseBytes}, the timeout covers the whole exchange. Throws
 * {@link NoAnswerError} when there is no answer, a `canceled` ManentError when `signal` aborts, and
 * {@link AddressRefusedError} when the rules refuse the address (nothing is sent then).
 */
export async function httpRequest(req: HttpRequest): Promise<HttpAnswer> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = AbortSignal.any([req.signal, timeout]);
  const url = new URL(req.url);
  let host: CheckedHost;
  try {
    host = await req.outbound.check(url, req.field);
  } catch (err) {
    if (err instanceof ManentError && err.code === Code.InvalidArgument) throw new AddressRefusedError(err.message);
    if (err instanceof ManentError) throw new NoAnswerError(err.message); // the name could not be resolved now
    throw err;
  }
  try {
    const response = await req.outbound.request(url, host, {
      method: req.method,
      headers: { ...req.headers, ...(req.body !== undefined && { "content-length": String(Buffer.byteLength(req.body)) }) },
      ...(req.body !== undefined && { body: req.body }),
      signal,
      label: "analysis",
    });
    const body = await readCapped(response);
    return { status: response.statusCode ?? 0, contentType: response.headers["content-type"] ?? "", body };
  } catch (err) {
    if (req.signal.aborted) throw new ManentError(Code.Canceled, "analysis canceled", { cause: req.signal.reason });
    if (err instanceof NoAnswerError) throw err;
    if (timeout.aborted) throw new NoAnswerError(`no answer within ${formatMs(req.timeoutMs)}`);
    throw new NoAnswerError(networkReason(err));
  }
}

async function readCapped(response: IncomingMessage): Promise<string> {
  const declared = Number(response.headers["content-length"] ?? "0");
  if (declared > maxResponseBytes) {
    response.destroy();
    throw new NoAnswerError(`response of ${declared} bytes is larger than ${maxResponseBytes}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxResponseBytes) {
      response.destroy();
      throw new NoAnswerError(`response larger than ${maxResponseBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The reason of a network failure: the socket error's message (`connect ECONNREFUSED 127.0.0.1:9`). */
function networkReason(err: unknown): string {
  const cause = (err as { cause?: unknown }).cause;
  const source = cause instanceof Error ? cause : err instanceof Error ? err : undefined;
  if (!source) return String(err);
  return source.message.split("\n")[0]!;
}

export function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
