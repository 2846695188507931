import { Code, ManentError } from "../core/errors.js";

/** The code of a client certificate the server dropped the connection over (no TLS alert says so). */
export const clientCertificateRefused = "MANENT_CLIENT_CERTIFICATE_REFUSED";

type Failure = "wrong-name" | "unverified" | "client-refused" | "not-tls" | "other";

/** The failed connection's own error code (fetch puts it in `cause`). */
function causeOf(err: unknown): { code: string; message: string } {
  const cause = (err as { cause?: { code?: unknown; message?: unknown; reason?: unknown } }).cause;
  // OpenSSL's errors carry a readable `reason` ("tlsv13 alert certificate required"); their message is a dump.
  const message =
    typeof cause?.reason === "string" ? cause.reason : typeof cause?.message === "string" ? cause.message : (err as Error).message;
  return { code: typeof cause?.code === "string" ? cause.code : "", message: message.trim() };
}

function classify(code: string): Failure {
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") return "wrong-name";
  // OpenSSL's alerts: the server refused our side of the handshake (mutual TLS).
  if ((code.startsWith("ERR_SSL_") && code.includes("_ALERT_")) || code === clientCertificateRefused) return "client-refused";
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || code === "ERR_SSL_PACKET_LENGTH_TOO_LONG") return "not-tls";
  // Node's verification codes (OpenSSL's X509_V_ERR_* names): SELF_SIGNED_CERT_IN_CHAIN, CERT_HAS_EXPIRED, …
  if (/CERT|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY/.test(code)) return "unverified";
  return "other";
}

/** Whether the failure is the TLS handshake's: trying again cannot help. */
export function isTlsRefusal(err: unknown): boolean {
  const failure = classify(causeOf(err).code);
  return failure !== "other";
}

/** Why a connection to the server failed, said so that the reader knows what to change. */
export function connectionError(err: unknown, baseUrl: string): ManentError {
  const { code, message } = causeOf(err);
  const reason = code ? `${message} (${code})` : message;
  switch (classify(code)) {
    case "wrong-name":
      return new ManentError(
        Code.Unavailable,
        `the TLS certificate of ${baseUrl} is not for this address: ${reason}; use an address the certificate names (--server or MANENT_SERVER)`,
      );
    case "unverified":
      return new ManentError(
        Code.Unavailable,
        `the TLS certificate of ${baseUrl} does not verify: ${reason}; if a private CA signed it, give that CA's certificate with --ca-file or MANENT_CA_FILE`,
      );
    case "client-refused":
      return new ManentError(
        Code.Unavailable,
        `manent-server at ${baseUrl} refused this client's TLS connection: ${reason}; a server with mutual TLS needs a client certificate ` +
          `signed by its client CA: --cert-file and --key-file (or MANENT_CLIENT_CERT and MANENT_CLIENT_KEY)`,
      );
    case "not-tls":
      return new ManentError(
        Code.Unavailable,
        `${baseUrl} does not speak TLS: ${reason}; a manent-server without tls in manent.yml serves http://`,
      );
    case "other": {
      const hint = baseUrl.startsWith("http:") && /SOCKET|ECONNRESET/.test(code) ? "; a manent-server with tls serves https://" : "";
      return new ManentError(
        Code.Unavailable,
        `cannot reach manent-server at ${baseUrl} (${code || message}); is it running? (set --server or MANENT_SERVER${hint})`,
      );
    }
  }
}
