import { z } from "zod";

const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const durationPattern = /^(\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const partPattern = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/** Parses a Go-style duration ("1m", "1m30s", "500ms", "0"), with days ("30d") as Prometheus has them; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  if (text === "0") return 0;
  if (!durationPattern.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(partPattern)) total += Number(amount) * unitMs[unit!]!;
  return Math.round(total);
}

/** A duration field: a Go-style string ("3m", "30s") or a number of seconds; parsed to milliseconds. */
export const durationMs = z
  .union([z.string(), z.number().nonnegative()])
  .transform((value, ctx) => {
    if (typeof value === "number") return Math.round(value * 1000);
    const ms = parseDuration(value);
    if (ms === undefined) {
      ctx.addIssue({ code: "custom", message: `"${value}" is not a duration (use e.g. 30s, 3m, 1h30m, 500ms, 30d)` });
      return z.NEVER;
    }
    return ms;
  })
  .meta({ type: "duration" });
