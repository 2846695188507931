import { z } from "zod";
import type { AnalysisCheck } from "./check-schema.js";
import type { Outbound } from "../../artifacts/network.js";
import { NoAnswerError, httpRequest } from "./http-request.js";
import { recordedValue, verdictOf, type Measurement } from "./measurement.js";
import { VariableError, renderPromql } from "./variables.js";

type Outcome = Pick<Measurement, "value" | "verdict" | "message">;
type PrometheusCheck = AnalysisCheck & { prometheus: NonNullable<AnalysisCheck["prometheus"]> };

// The answer of /api/v1/query (https://prometheus.io/docs/prometheus/latest/querying/api/).
const sampleSchema = z.tuple([z.number(), z.string()]);
const answerSchema = z.object({
  status: z.enum(["success", "error"]),
  data: z.object({ resultType: z.string(), result: z.unknown() }).optional(),
  errorType: z.string().optional(),
  error: z.string().optional(),
});
const vectorSchema = z.array(z.object({ metric: z.record(z.string(), z.string()).optional(), value: sampleSchema }));

/** Measures a Prometheus instant query: its one value, judged by the check's conditions. */
export async function measurePrometheus(
  name: string,
  check: PrometheusCheck,
  vars: Record<string, string>,
  signal: AbortSignal,
  token: string | undefined,
  outbound: Outbound,
): Promise<Outcome> {
  const { address, timeout } = check.prometheus;
  let query: string;
  try {
    query = renderPromql(check.prometheus.query, vars);
  } catch (err) {
    if (!(err instanceof VariableError)) throw err;
    return { value: null, verdict: "failed", message: `${name}: ${err.message}` };
  }
  const inconclusive = (message: string, value: number | string | null = null): Outcome => ({
    value,
    verdict: "inconclusive",
    message: `${name}: ${message}`,
  });
  const where = `Prometheus at ${address}`;
  let answer;
  try {
    answer = await httpRequest({
      url: `${address.replace(/\/+$/, "")}/api/v1/query`,
      field: `analysis.checks.${name}.prometheus.address`,
      outbound,
      method: "POST",
      headers: {
        accept: "application/json",
        "content-type": "application/x-www-form-urlencoded",
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      // Prometheus's own timeout stops the evaluation server-side when the client gives up.
      body: new URLSearchParams({ query, timeout: `${timeout / 1000}s` }).toString(),
      timeoutMs: timeout,
      signal,
    });
  } catch (err) {
    if (err instanceof NoAnswerError) return inconclusive(`${where} unreachable: ${err.message}`);
    throw err;
  }
  let parsed: z.infer<typeof answerSchema>;
  try {
    parsed = answerSchema.parse(JSON.parse(answer.body));
  } catch {
    return inconclusive(`${where} answered ${answer.status} without a query result`);
  }
  if (parsed.status === "error" || answer.status >= 300 || !parsed.data) {
    return inconclusive(`${where} answered ${answer.status} ${parsed.errorType ?? "error"}: ${truncate(parsed.error ?? "no data")}`);
  }
  const { resultType, result } = parsed.data;
  let sample: [number, string];
  if (resultType === "scalar") {
    const scalar = sampleSchema.safeParse(result);
    if (!scalar.success) return inconclusive("the query returned a malformed scalar");
    sample = scalar.data;
  } else if (resultType === "vector") {
    const vector = vectorSchema.safeParse(result);
    if (!vector.success) return inconclusive("the query returned a malformed vector");
    if (vector.data.length === 0) return inconclusive("the query returned an empty result (no series matched)");
    if (vector.data.length > 1) {
      return inconclusive(`the query returned ${vector.data.length} series, not one (aggregate it, e.g. with sum or avg)`);
    }
    sample = vector.data[0]!.value;
  } else {
    return inconclusive(`the query returned a ${resultType}, not a number (use an instant vector or a scalar)`);
  }
  const value = promValue(sample[1]);
  if (Number.isNaN(value))
    return inconclusive("the query returned NaN (no data to compute it from, e.g. no requests)", recordedValue(value));
  return { value: recordedValue(value), ...verdictOf(name, check, value) };
}

/** Prometheus writes floats as Go does: "+Inf", "-Inf", "NaN" besides decimals. */
function promValue(text: string): number {
  if (text === "+Inf" || text === "Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text);
}

function truncate(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
