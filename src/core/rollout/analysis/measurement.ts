import type { AnalysisCheck } from "./check-schema.js";
import { ConditionEvaluationError, compileCondition, evaluateCondition, type ConditionValue } from "./condition.js";

export type Verdict = "successful" | "failed" | "inconclusive";

/** One measurement of a check, as recorded on the deploy and shown to the user. */
export interface Measurement {
  /** The check's name in `analysis.checks`. */
  check: string;
  /** When the measurement was taken (ISO 8601). */
  at: string;
  /** The measured value: a number, a string (a JSON field, "NaN", "+Inf", a status code refused), or null when none was obtained. */
  value: number | string | null;
  verdict: Verdict;
  /** Why this verdict, naming the check, the value and the condition; never a secret. */
  message: string;
}

const maxValueText = 200;

/** The value as recorded: finite numbers stay numbers, other values become text. */
export function recordedValue(value: ConditionValue | undefined): number | string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    return Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  }
  const text = String(value);
  return text.length > maxValueText ? `${text.slice(0, maxValueText)}…` : text;
}

/** The value as it reads in a message. */
export function showValue(value: ConditionValue | undefined): string {
  const recorded = recordedValue(value);
  return typeof value === "string" ? JSON.stringify(recorded) : String(recorded);
}

/**
 * The verdict of a measured value, as Argo Rollouts decides it: with both conditions, the failure
 * condition wins, then the success condition, and a value meeting neither is inconclusive; with one
 * condition, not meeting it decides the other way. A value the conditions cannot judge (a string
 * compared with <) is inconclusive.
 */
export function verdictOf(name: string, check: AnalysisCheck, value: ConditionValue): { verdict: Verdict; message: string } {
  const kind = check.prometheus ? "number" : "json";
  const shown = `${name}: ${showValue(value)}`;
  const success = check.success_condition;
  const failure = check.failure_condition;
  try {
    if (failure !== undefined && evaluateCondition(compileCondition(failure, kind), value)) {
      return { verdict: "failed", message: `${shown} meets failure_condition "${failure}"` };
    }
    if (success !== undefined) {
      if (evaluateCondition(compileCondition(success, kind), value)) {
        return { verdict: "successful", message: `${shown} meets success_condition "${success}"` };
      }
      if (failure === undefined) return { verdict: "failed", message: `${shown} does not meet success_condition "${success}"` };
      return {
        verdict: "inconclusive",
        message: `${shown} meets neither success_condition "${success}" nor failure_condition "${failure}"`,
      };
    }
    return { verdict: "successful", message: `${shown} does not meet failure_condition "${failure}"` };
  } catch (err) {
    if (!(err instanceof ConditionEvaluationError)) throw err;
    return { verdict: "inconclusive", message: `${shown} cannot be judged: ${err.message}` };
  }
}
