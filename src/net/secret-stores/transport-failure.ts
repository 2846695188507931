import { Code, ManentError } from "../../core/errors.js";
import { tlsVerifyCodes } from "../tls-verify-codes.js";

/** The first error code (ECONNREFUSED, a TLS code) in an error's cause chain (fetch and node-fetch wrap it). */
function errorCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return code;
  }
  return undefined;
}

/**
 * A request to a secret store that got no answer, as an error naming the reference and the
 * store, and nothing of the request (no header, no body): `unavailable` (retried), except a
 * certificate that does not verify, which a retry will not change (`failed_precondition`, naming
 * the CA field to set).
 */
export function transportFailure(err: unknown, shown: string, store: string, timeoutMs: number, caField: string): ManentError {
  const code = errorCode(err);
  if (code !== undefined && tlsVerifyCodes.has(code))
    return new ManentError(
      Code.FailedPrecondition,
      `${shown}: cannot verify the certificate of ${store} (${code}): set ${caField} to the CA that signed it`,
      {
        details: { ref: shown, tls_error: code },
      },
    );
  const cause = (err as { cause?: { message?: unknown } }).cause?.message;
  const reason =
    (err as { name?: string }).name === "TimeoutError"
      ? `no answer within ${timeoutMs / 1000}s`
      : (code ?? (typeof cause === "string" ? cause.slice(0, 200) : "the connection failed"));
  return new ManentError(Code.Unavailable, `${shown}: ${store} cannot be reached: ${reason}`, { details: { ref: shown } });
}
