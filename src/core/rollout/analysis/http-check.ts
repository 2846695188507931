import type { AnalysisCheck } from "./check-schema.js";
import type { ConditionValue } from "./condition.js";
import type { Outbound } from "../../artifacts/network.js";
import { NoAnswerError, httpRequest } from "./http-request.js";
import { verdictOf, recordedValue, type Measurement } from "./measurement.js";
import { VariableError, renderUrl } from "./variables.js";

type Outcome = Pick<Measurement, "value" | "verdict" | "message">;
type HttpCheck = AnalysisCheck & { http: NonNullable<AnalysisCheck["http"]> };

/**
 * Measures an HTTP check: a status outside `expected_status` fails; with `json_field`, the field's
 * value is judged by the check's conditions. No answer, a body that is not JSON, or a missing field
 * is inconclusive.
 */
export async function measureHttp(
  name: string,
  check: HttpCheck,
  vars: Record<string, string>,
  signal: AbortSignal,
  token: string | undefined,
  outbound: Outbound,
): Promise<Outcome> {
  const spec = check.http;
  let url: string;
  try {
    url = renderUrl(spec.url, vars);
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new VariableError("the substituted URL is not http(s)");
  } catch (err) {
    if (!(err instanceof VariableError) && !(err instanceof TypeError)) throw err;
    return {
      value: null,
      verdict: "failed",
      message: `${name}: ${err instanceof VariableError ? err.message : "the substituted URL is not a URL"}`,
    };
  }
  const shownUrl = withoutQuery(url);
  let answer;
  try {
    answer = await httpRequest({
      url,
      field: `analysis.checks.${name}.http.url`,
      outbound,
      method: spec.method,
      headers: {
        accept: "application/json, */*;q=0.5",
        ...spec.headers,
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      ...(spec.body !== undefined && { body: spec.body }),
      timeoutMs: spec.timeout,
      signal,
    });
  } catch (err) {
    if (err instanceof NoAnswerError)
      return { value: null, verdict: "inconclusive", message: `${name}: ${spec.method} ${shownUrl} unreachable: ${err.message}` };
    throw err;
  }
  const expected = spec.expected_status ? spec.expected_status.includes(answer.status) : answer.status >= 200 && answer.status < 300;
  if (!expected) {
    return {
      value: answer.status,
      verdict: "failed",
      message: `${name}: ${spec.method} ${shownUrl} answered ${answer.status}, expected ${spec.expected_status?.join(" or ") ?? "2xx"}`,
    };
  }
  if (spec.json_field === undefined) {
    return { value: answer.status, verdict: "successful", message: `${name}: ${spec.method} ${shownUrl} answered ${answer.status}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(answer.body);
  } catch {
    return {
      value: null,
      verdict: "inconclusive",
      message: `${name}: ${spec.method} ${shownUrl} answered ${answer.status} without a JSON body`,
    };
  }
  const field = fieldAt(json, spec.json_field);
  if (field === undefined) {
    return { value: null, verdict: "inconclusive", message: `${name}: the response has no field ${spec.json_field}` };
  }
  if (typeof field === "object" && field !== null) {
    return {
      value: recordedValue(JSON.stringify(field)),
      verdict: "inconclusive",
      message: `${name}: field ${spec.json_field} is an ${Array.isArray(field) ? "array" : "object"}, not a value`,
    };
  }
  const value = field as ConditionValue;
  const { verdict, message } = verdictOf(name, check, value);
  return { value: recordedValue(value), verdict, message: message.replace(`${name}: `, `${name}: ${spec.json_field} = `) };
}

/** The value at a dotted path; numeric segments index arrays. Own properties only. */
function fieldAt(json: unknown, path: string): unknown {
  let node = json;
  for (const key of path.split(".")) {
    if (typeof node !== "object" || node === null || !Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** A URL as it appears in messages: the query may carry tokens some APIs accept there. */
function withoutQuery(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}${u.search ? "?…" : ""}`;
}
