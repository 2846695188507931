import { Cron } from "croner";
import { z } from "zod";
import { durationMs } from "./duration.js";

const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` })
    .default("*");

const ruleName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[A-Za-z0-9][A-Za-z0-9 ._:-]*$/, {
    message: "must be letters, digits, spaces, '.', '_', ':' and '-', starting with a letter or digit",
  });

const mode = z
  .enum(["wait", "refuse"])
  .default("wait")
  .describe(
    "What a deploy submitted while this rule keeps deploys out does: wait (queued, durably, until the next opening) or refuse (at submission, 412)",
  );

/** An IANA time zone name this runtime knows (Europe/Paris, America/New_York, UTC). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Croner's reading of a schedule: five fields (minute hour day month weekday), or six with seconds first. */
export function cronOf(schedule: string, timeZone: string): Cron {
  return new Cron(schedule, { timezone: timeZone, mode: "5-or-6-parts", paused: true });
}

const windowSchema = z
  .strictObject({
    name: ruleName.describe("The rule's name, shown when it keeps a deploy waiting or refuses it"),
    kind: z
      .enum(["allow", "deny"])
      .describe(
        "allow: deploys in scope run only while one of their allow windows is open; deny: no deploy in scope runs while it is open",
      ),
    schedule: z
      .string()
      .min(1)
      .max(200)
      .meta({
        description:
          "When the window opens, as a cron expression read in time_zone: five fields (minute hour day-of-month month day-of-week), or six with seconds first",
        examples: ["0 9 * * 1-5", "0 22 * * 5"],
      }),
    duration: durationMs
      .refine((ms) => ms > 0, { message: "must be more than 0" })
      .describe("How long the window stays open from each time the schedule names (elapsed time, e.g. 8h)"),
    time_zone: z
      .string()
      .default("UTC")
      .refine(isTimeZone, { message: "is not an IANA time zone this server knows (e.g. Europe/Paris, America/New_York, UTC)" })
      .describe("The IANA time zone the schedule is read in, daylight saving time included (default UTC)"),
    tenant: pattern("tenant").describe("The tenants the window is for"),
    application: pattern("application").describe("The applications the window is for"),
    environment: pattern("environment").describe("The environments the window is for"),
    mode,
  })
  .superRefine((w, ctx) => {
    if (!isTimeZone(w.time_zone)) return; // said by time_zone's own check
    try {
      const next = cronOf(w.schedule, w.time_zone).nextRun(new Date());
      if (next === null) ctx.addIssue({ code: "custom", path: ["schedule"], message: "names no time from now on" });
    } catch (err) {
      ctx.addIssue({ code: "custom", path: ["schedule"], message: `is not a cron expression: ${(err as Error).message}` });
    }
  });

// With an offset (Z or ±hh:mm): a freeze is a moment, never read in a server's local time.
const instant = z.iso.datetime({ offset: true }).transform((s) => Date.parse(s));

const freezeSchema = z
  .strictObject({
    name: ruleName.describe("The freeze's name, shown when it keeps a deploy waiting or refuses it"),
    start: instant.meta({ description: "When the freeze begins (RFC 3339 with an offset)", examples: ["2026-12-20T00:00:00+01:00"] }),
    end: instant.meta({
      description: "When the freeze ends (RFC 3339 with an offset); deploys run again from then",
      examples: ["2027-01-04T08:00:00+01:00"],
    }),
    reason: z.string().min(1).max(500).describe("Why nothing may be deployed, shown with every deploy it holds back"),
    tenant: pattern("tenant").describe("The tenants the freeze is for"),
    application: pattern("application").describe("The applications the freeze is for"),
    environment: pattern("environment").describe("The environments the freeze is for"),
    mode,
  })
  .refine((f) => f.end > f.start, { path: ["end"], message: "must be after start" });

/**
 * When deploys may run (`deploy_windows` in manent.yml), as Argo CD's sync windows and a freeze
 * calendar: a deploy in the scope of an allow window runs only while one is open, and never while a
 * deny window or a freeze in its scope is (deny wins over allow). Absent: deploys run at any time.
 */
export const deployWindowsConfigSchema = z
  .strictObject({
    windows: z
      .array(windowSchema)
      .max(1000)
      .default([])
      .describe("Recurring windows: a cron schedule, a duration and a time zone, allowing or denying deploys in their scope"),
    freezes: z
      .array(freezeSchema)
      .max(1000)
      .default([])
      .describe("Date-time ranges with a reason in which no deploy in scope runs, as a deny window"),
  })
  .default({ windows: [], freezes: [] })
  .describe(
    "When deploys (and releases' stage deploys) may run: allow and deny windows and freezes per tenant, application and environment; a deploy outside waits durably or is refused, and an admin may override with a reason",
  );

export type DeployWindowsConfig = z.output<typeof deployWindowsConfigSchema>;
export type DeployWindowRule = DeployWindowsConfig["windows"][number];
export type DeployFreeze = DeployWindowsConfig["freezes"][number];
