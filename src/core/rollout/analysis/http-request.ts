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

export interface HttpRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * One HTTP request of a measurement: redirects are not followed (a check names where it goes),
 * the body is read up to {@link maxResponseBytes}, the timeout covers the whole exchange. Throws
 * {@link NoAnswerError} when there is no answer, and a `canceled` ManentError when `signal` aborts.
 */
export async function httpRequest(req: HttpRequest): Promise<HttpAnswer> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = AbortSignal.any([req.signal, timeout]);
  try {
    const response = await fetch(req.url, {
      method: req.method,
      headers: req.headers,
      ...(req.body !== undefined && { body: req.body }),
      redirect: "manual",
      signal,
    });
    const body = await readCapped(response);
    return { status: response.status, contentType: response.headers.get("content-type") ?? "", body };
  } catch (err) {
    if (req.signal.aborted) throw new ManentError(Code.Canceled, "analysis canceled", { cause: req.signal.reason });
    if (err instanceof NoAnswerError) throw err;
    if (timeout.aborted) throw new NoAnswerError(`no answer within ${formatMs(req.timeoutMs)}`);
    throw new NoAnswerError(networkReason(err));
  }
}

async function readCapped(response: Response): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > maxResponseBytes) {
    await response.body?.cancel();
    throw new NoAnswerError(`response of ${declared} bytes is larger than ${maxResponseBytes}`);
  }
  if (!response.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxResponseBytes) {
      await reader.cancel();
      throw new NoAnswerError(`response larger than ${maxResponseBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The reason of a network failure, from undici's `fetch failed` and its cause. */
function networkReason(err: unknown): string {
  const cause = (err as { cause?: unknown }).cause;
  const source = cause instanceof Error ? cause : err instanceof Error ? err : undefined;
  if (!source) return String(err);
  return source.message.split("\n")[0]!;
}

export function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
