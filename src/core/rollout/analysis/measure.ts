import { readBearerToken } from "../../config/secret-ref.js";
import { Code, ManentError } from "../../errors.js";
import type { AnalysisCheck } from "./check-schema.js";
import { measureHttp } from "./http-check.js";
import type { Outbound } from "../../artifacts/network.js";
import { AddressRefusedError } from "./http-request.js";
import type { Measurement } from "./measurement.js";
import { measurePrometheus } from "./prometheus-check.js";

type Outcome = Pick<Measurement, "value" | "verdict" | "message">;

/**
 * Takes one measurement of a check. A failed or inconclusive measurement is a result, never an
 * exception: this throws only a `canceled` ManentError when `signal` aborts. The bearer token is
 * read now (so a rotated secret is picked up) and never appears in the measurement. `outbound`
 * applies the server's address rules; a refused address fails the measurement (a retry cannot
 * change the rules), and nothing is sent to it.
 */
export async function measure(
  name: string,
  check: AnalysisCheck,
  vars: Record<string, string>,
  signal: AbortSignal,
  outbound: Outbound,
): Promise<Measurement> {
  const canceled = () => new ManentError(Code.Canceled, "analysis canceled", { cause: signal.reason });
  if (signal.aborted) throw canceled();
  const at = new Date().toISOString();
  let token: string | undefined;
  let outcome: Outcome;
  try {
    token = await bearerToken(name, check);
    outcome = check.prometheus
      ? await measurePrometheus(name, { ...check, prometheus: check.prometheus }, vars, signal, token, outbound)
      : check.http
        ? await measureHttp(name, { ...check, http: check.http }, vars, signal, token, outbound)
        : { value: null, verdict: "failed", message: `${name}: the check has neither prometheus nor http` };
  } catch (err) {
    if (signal.aborted) throw canceled();
    if (err instanceof ManentError && err.code === Code.Canceled) throw err;
    if (err instanceof AddressRefusedError) return { check: name, at, verdict: "failed", value: null, message: `${name}: ${err.message}` };
    // The secret could not be read, or something unforeseen: the check could not measure.
    outcome = { value: null, verdict: "inconclusive", message: `${name}: ${err instanceof Error ? err.message : String(err)}` };
  }
  const value = typeof outcome.value === "string" ? redact(outcome.value, token) : outcome.value;
  return { check: name, at, verdict: outcome.verdict, value, message: redact(outcome.message, token) };
}

async function bearerToken(name: string, check: AnalysisCheck): Promise<string | undefined> {
  const ref = check.prometheus?.bearer_token ?? check.http?.bearer_token;
  return ref && readBearerToken(`analysis.checks.${name}.bearer_token`, ref);
}

/** Belt and braces: no message or value may carry the token, whatever a server echoes back. */
function redact(message: string, token: string | undefined): string {
  return token && token.length >= 4 ? message.replaceAll(token, "***") : message;
}
