/**
 * manent's one error model. Every error that crosses a module, process or wire boundary is a
 * {@link ManentError} with a {@link Code} from a closed set aligned with gRPC status codes, so an
 * error keeps its meaning from a plugin process, through the go-plugin gRPC channel, into a DBOS
 * step record and out of the HTTP API.
 */

/** Error codes, named and numbered as gRPC's (`google.rpc.Code`). */
export const Code = {
  /** The deploy or the call was cancelled (a user's cancel, a shutdown, an aborted signal). */
  Canceled: 1,
  /** An error that carried no code: a plain exception from a plugin or a library. Retried. */
  Unknown: 2,
  /** Bad input: a file, field, param or flag refused; names the file and field. Never retried. */
  InvalidArgument: 3,
  /** A step or call ran out of time (step `timeout`, validate's 30 s, a rollout's wait). Retried. */
  DeadlineExceeded: 4,
  /** A deploy, file or secret that does not exist. */
  NotFound: 5,
  AlreadyExists: 6,
  /** The token may not act on the tenant; a plugin's target refused the operation (RBAC 403). */
  PermissionDenied: 7,
  /** An upload that would take its tenant over its quota (uploads.quota_per_tenant); a target's disk full. */
  ResourceExhausted: 8,
  /** The state does not allow it: a deploy already ended, nothing to roll back to, a plugin that gave up. */
  FailedPrecondition: 9,
  /**
   * Permanent: what `permanent(err)` marks and gRPC ABORTED carries; the step fails without retries.
   * In the API, a conflict: an upload a deploy still needs is not deleted.
   */
  Aborted: 10,
  OutOfRange: 11,
  /** A capability the plugin lacks (gRPC UNIMPLEMENTED): dry-run stops at validation, rollouts fail. */
  Unimplemented: 12,
  /** A bug in manent. */
  Internal: 13,
  /** Something that may pass on a retry: a connection refused, a 5xx, a plugin process that crashed. */
  Unavailable: 14,
  DataLoss: 15,
  /** A missing or unknown API token, or a target that refused the credentials (SSH key). */
  Unauthenticated: 16,
} as const;
export type Code = (typeof Code)[keyof typeof Code];

const codeNames: Record<Code, string> = {
  1: "canceled",
  2: "unknown",
  3: "invalid_argument",
  4: "deadline_exceeded",
  5: "not_found",
  6: "already_exists",
  7: "permission_denied",
  8: "resource_exhausted",
  9: "failed_precondition",
  10: "aborted",
  11: "out_of_range",
  12: "unimplemented",
  13: "internal",
  14: "unavailable",
  15: "data_loss",
  16: "unauthenticated",
};

/** Every code's snake_case name, in code order (the web UI's audit filter offers them). */
export const allCodeNames: readonly string[] = Object.values(codeNames);

/** The snake_case name of a code, as it appears in JSON (`"invalid_argument"`). */
export function codeName(code: Code): string {
  return codeNames[code];
}

/** Parses a code from its number or snake_case name; unknown input gives {@link Code.Unknown}. */
export function parseCode(value: unknown): Code {
  if (typeof value === "number" && value in codeNames) return value as Code;
  if (typeof value === "string") {
    for (const [num, name] of Object.entries(codeNames)) if (name === value) return Number(num) as Code;
  }
  return Code.Unknown;
}

/**
 * Codes whose failure a retry of the same input cannot fix. `aborted` is the code that a plugin's
 * `permanent(err)` crosses the wire with (see external-plugins.md); the others are caller mistakes.
 */
const permanentCodes: ReadonlySet<Code> = new Set<Code>([
  Code.Aborted,
  Code.InvalidArgument,
  Code.FailedPrecondition,
  Code.PermissionDenied,
  Code.Unauthenticated,
  Code.Unimplemented,
  Code.AlreadyExists,
]);

/** The JSON form of an error, stored in step records and returned by the API. */
export interface ErrorJSON {
  code: string;
  message: string;
  details?: Record<string, string>;
}

export class ManentError extends Error {
  override readonly name = "ManentError";
  readonly code: Code;
  /** Machine-readable facts about the failure (file, field, plugin, target…); never secrets. */
  readonly details: Record<string, string>;

  constructor(code: Code, message: string, options?: { cause?: unknown; details?: Record<string, string> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details ?? {};
  }

  /** True when retrying the same operation cannot succeed. */
  get permanent(): boolean {
    return permanentCodes.has(this.code);
  }

  toJSON(): ErrorJSON {
    const json: ErrorJSON = { code: codeName(this.code), message: this.message };
    if (Object.keys(this.details).length > 0) json.details = this.details;
    return json;
  }

  /** Rebuilds an error from its JSON form (a step record, an API response, a wire trailer). */
  static fromJSON(json: ErrorJSON): ManentError {
    return new ManentError(parseCode(json.code), json.message, { details: json.details ?? {} });
  }

  /**
   * Converts anything thrown into a ManentError. A ManentError is returned as is; an error that
   * went through a serializer (DBOS records errors as plain objects) keeps its code; an
   * AbortError becomes `canceled`; anything else is `unknown` with the original as cause.
   */
  static from(reason: unknown, fallback: Code = Code.Unknown): ManentError {
    if (reason instanceof ManentError) return reason;
    if (isErrorLike(reason)) {
      if (reason.name === "ManentError" && reason.code !== undefined) {
        return new ManentError(parseCode(reason.code), reason.message, {
          details: (reason.details as Record<string, string> | undefined) ?? {},
        });
      }
      if (reason.name === "AbortError") return new ManentError(Code.Canceled, reason.message, { cause: reason });
      return new ManentError(fallback, reason.message, { cause: reason });
    }
    return new ManentError(fallback, String(reason));
  }
}

interface ErrorLike {
  name: string;
  message: string;
  code?: unknown;
  details?: unknown;
}

function isErrorLike(v: unknown): v is ErrorLike {
  return typeof v === "object" && v !== null && typeof (v as ErrorLike).message === "string";
}

/**
 * Marks an error that a retry cannot fix: the step fails at once. Crosses the plugin protocol as
 * gRPC ABORTED.
 */
export function permanent(err: unknown): ManentError {
  const e = ManentError.from(err);
  return new ManentError(Code.Aborted, e.message, { cause: err, details: e.details });
}

/** True when `err` should not be retried. */
export function isPermanent(err: unknown): boolean {
  return ManentError.from(err).permanent;
}
