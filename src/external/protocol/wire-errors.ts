import { Metadata, status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { Code, codeName, ManentError, parseCode } from "../../core/errors.js";
import { ResultError } from "../../core/contract/result-error.js";
import { ErrorDetail } from "../gen/deployer.js";
import { ERROR_TRAILER } from "./constants.js";
import { resultFromProto, resultToProto } from "./convert.js";

/**
 * The failure converter of the plugin protocol, used in both directions. An error crosses as a
 * gRPC status with the same code (permanent() = ABORTED) plus an ErrorDetail in the
 * `manent-error-bin` trailer carrying the code name, message, details and, for a failed deploy,
 * the per-target results.
 */
export function toStatus(err: unknown): Partial<StatusObject> {
  const e = ManentError.from(err);
  const detail: ErrorDetail = { code: codeName(e.code), message: e.message, details: { ...e.details }, partialResult: undefined };
  if (e instanceof ResultError) detail.partialResult = resultToProto(e.result);
  const metadata = new Metadata();
  metadata.set(ERROR_TRAILER, Buffer.from(ErrorDetail.encode(detail).finish()));
  return { code: e.code as number as status, details: e.message, metadata };
}

/**
 * Rebuilds the error a call failed with. Without a trailer (a transport failure, a plugin
 * written without the SDK) the gRPC code is kept; UNIMPLEMENTED means the capability is absent.
 * `what` names the plugin and call for messages.
 */
/**
 * True when the client reports its connection to the plugin failing (the process died, hung up or
 * never answered), as opposed to a status the plugin itself returned. grpc-js words these itself;
 * the host's client (h2-channel.ts) words them as grpc-js does.
 */
export function isTransportLoss(err: ServiceError): boolean {
  if (err.code !== status.UNAVAILABLE && err.code !== status.INTERNAL && err.code !== status.CANCELLED) return false;
  return /Connection dropped|No connection established|ECONNRESET|ECONNREFUSED|Socket closed|RST_STREAM|Stream removed|connection closed|Failed to connect|EPIPE/i.test(
    err.details ?? "",
  );
}

export function fromServiceError(err: ServiceError, plugin: string, call: string): ManentError {
  const raw = err.metadata?.get(ERROR_TRAILER)[0];
  if (raw instanceof Buffer) {
    try {
      const detail = ErrorDetail.decode(raw);
      const code = detail.code === "" ? (err.code as number as Code) : parseCode(detail.code);
      const e = new ManentError(code, detail.message, { details: { ...detail.details, plugin } });
      return detail.partialResult ? new ResultError(e, resultFromProto(detail.partialResult)) : e;
    } catch {
      // A corrupt trailer: fall through to the status code.
    }
  }
  const details = { plugin, call };
  switch (err.code) {
    case status.UNIMPLEMENTED:
      return new ManentError(Code.Unimplemented, `plugin ${plugin} does not implement ${call}`, { details });
    case status.CANCELLED:
      return new ManentError(Code.Canceled, `plugin ${plugin}: ${call} cancelled`, { details });
    case status.UNAVAILABLE:
      // The plugin's own UNAVAILABLE keeps its message; only a lost transport is reported as such.
      return isTransportLoss(err)
        ? new ManentError(Code.Unavailable, `plugin ${plugin}: ${call}: connection to the plugin lost (${err.details})`, { details })
        : new ManentError(Code.Unavailable, `plugin ${plugin}: ${call}: ${err.details}`, { details });
    case status.OK:
      return new ManentError(Code.Unknown, `plugin ${plugin}: ${call} failed without status`, { details });
    default:
      return new ManentError(err.code as number as Code, `plugin ${plugin}: ${call}: ${err.details}`, { details });
  }
}
