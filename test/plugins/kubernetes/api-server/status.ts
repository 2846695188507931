/** Kubernetes `Status` failure bodies, shaped like the real API server's. */
export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: { reason: string; message: string; field?: string }[] };
  code: number;
}

export class HttpStatusError extends Error {
  constructor(readonly body: StatusBody) {
    super(body.message);
  }
}

export function failure(code: number, reason: string, message: string, details?: StatusBody["details"]): HttpStatusError {
  return new HttpStatusError({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, ...(details ? { details } : {}), code });
}

export function success(details: StatusBody["details"]): StatusBody {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details, code: 200 };
}
