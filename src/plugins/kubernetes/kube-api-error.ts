import { Code, ManentError } from "../../core/errors.js";

/** The `Status` object the API server returns with a failure. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { name?: string; group?: string; kind?: string; causes?: { reason?: string; message?: string; field?: string }[] };
}

/**
 * A server-side apply of a field the schema lacks (`spec.replica`) is not a 4xx on a real API
 * server: building the typed patch fails and the answer is a plain 500 InternalError whose message
 * says `field not declared in schema`. No retry can fix it, so it is recognised by that message.
 */
const undeclaredField = /field not declared in schema|failed to create typed patch object/;

/**
 * HTTP status (and, where the status alone misleads, the Status body) → error code. What a retry
 * can fix (429, 5xx other than the above) stays retryable.
 */
function codeOf(status: number, body: KubeStatus): Code {
  if (status === 400 || status === 422) return Code.InvalidArgument;
  if (status === 401) return Code.Unauthenticated;
  if (status === 403) return Code.PermissionDenied;
  // The namespace of the object does not exist: nothing will create it between two retries.
  if (status === 404 && isMissingNamespace(body)) return Code.FailedPrecondition;
  if (status === 404) return Code.NotFound;
  if (status === 409) return Code.Aborted;
  if (status === 500 && undeclaredField.test(body.message ?? "")) return Code.InvalidArgument;
  if (status === 429 || status >= 500) return Code.Unavailable;
  return Code.Unknown;
}

/** `namespaces "x" not found`: the answer to a write into a namespace that does not exist. */
export function isMissingNamespace(body: KubeStatus): boolean {
  return body.reason === "NotFound" && body.details?.kind === "namespaces";
}

/** True for the 500 a server-side apply gets for a field its schema does not declare. */
export function isUndeclaredField(err: KubeApiError): boolean {
  return err.status === 500 && undeclaredField.test(err.body.message ?? "");
}

/** A failed API request, with the HTTP status and the server's Status body. */
export class KubeApiError extends ManentError {
  constructor(
    readonly status: number,
    readonly body: KubeStatus,
    readonly request: string,
  ) {
    super(codeOf(status, body), `${request}: ${status} ${body.reason ?? ""}: ${body.message ?? "no message"}`.replace(/ +:/, ":"), {
      details: { http_status: String(status), ...(body.reason ? { reason: body.reason } : {}) },
    });
  }
}

/**
 * The verb and resource a 403 names (`cannot patch resource "deployments" in API group "apps"`),
 * so the error tells which permission the service account lacks.
 */
export function missingPermission(err: KubeApiError): { verb: string; resource: string } | undefined {
  const m = /cannot (\w+) resource "([^"]+)" in API group "([^"]*)"/.exec(err.body.message ?? "");
  if (!m) return undefined;
  return { verb: m[1]!, resource: m[3] ? `${m[2]}.${m[3]}` : m[2]! };
}
