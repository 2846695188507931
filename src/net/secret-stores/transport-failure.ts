import { Code, ManentError } from "../../core/errors.js";

/** Node's codes for a server certificate that does not verify (OpenSSL's, and the host name check). */
const tlsCodes = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

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
  if (code !== undefined && tlsCodes.has(code))
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
