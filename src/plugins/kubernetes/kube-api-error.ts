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

/** HTTP status → error code; what a retry can fix (429, 5xx) stays retryable. */
function codeOf(status: number): Code {
  if (status === 400 || status === 422) return Code.InvalidArgument;
  if (status === 401) return Code.Unauthenticated;
  if (status === 403) return Code.PermissionDenied;
  if (status === 404) return Code.NotFound;
  if (status === 409) return Code.Aborted;
  if (status === 429 || status >= 500) return Code.Unavailable;
  return Code.Unknown;
}

/** A failed API request, with the HTTP status and the server's Status body. */
export class KubeApiError extends ManentError {
  constructor(
    readonly status: number,
    readonly body: KubeStatus,
    readonly request: string,
  ) {
    super(codeOf(status), `${request}: ${status} ${body.reason ?? ""}: ${body.message ?? "no message"}`.replace(/ +:/, ":"), {
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
