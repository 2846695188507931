import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadManentConfig } from "../../src/core/config/index.js";
import { deployWindowsConfigSchema } from "../../src/core/config/deploy-windows-config.js";
import { WindowCalendar } from "../../src/core/windows/window-calendar.js";
import { createWorkspace } from "../support/workspace.js";

const calendar = (config: unknown) => new WindowCalendar(deployWindowsConfigSchema.parse(config));
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const shop = { tenant: "team-a", application: "shop", environment: "prod" };

/** The window computation of deploy_windows (window-calendar.ts): time zones, DST, deny over allow, freezes, scopes. */
describe("deploy windows", () => {
  it("lets every deploy run when no rule is in its scope", () => {
    const c = calendar({ windows: [{ name: "nights", kind: "deny", schedule: "0 22 * * *", duration: "8h", environment: "staging" }] });
    assert.deepEqual(c.verdict(shop, at("2026-06-01T23:00:00Z")), { open: true });
    assert.equal(calendar({}).empty, true);
  });

  it("reads an allow window's schedule in its time zone, and says when the next one opens", () => {
    const c = calendar({
      windows: [{ name: "office", kind: "allow", schedule: "0 9 * * 1-5", duration: "8h", time_zone: "America/New_York" }],
    });
    // Monday 1 June 2026, 09:00 in New York is 13:00 UTC (EDT, UTC-4).
    assert.deepEqual(c.verdict(shop, at("2026-06-01T13:00:00Z")), { open: true });
    assert.deepEqual(c.verdict(shop, at("2026-06-01T20:59:59Z")), { open: true });
    const after = c.verdict(shop, at("2026-06-01T21:00:00Z"));
    assert.equal(after.open, false);
    assert.ok(!after.open);
    assert.equal(iso(after.until), "2026-06-02T13:00:00.000Z");
    assert.equal(after.rule, "outside allow window office");
    assert.equal(after.mode, "wait");
    // Friday evening: the next opening is Monday.
    const weekend = c.verdict(shop, at("2026-06-05T22:00:00Z"));
    assert.ok(!weekend.open);
    assert.equal(iso(weekend.until), "2026-06-08T13:00:00.000Z");
  });

  it("follows daylight saving time: the same local hour is another UTC hour after the change", () => {
    const c = calendar({ windows: [{ name: "morning", kind: "allow", schedule: "0 9 * * *", duration: "1h", time_zone: "Europe/Paris" }] });
    // Saturday 28 March 2026 is still CET (UTC+1); Europe moves to CEST (UTC+2) on Sunday 29 March.
    const before = c.verdict(shop, at("2026-03-28T07:00:00Z"));
    assert.ok(!before.open);
    assert.equal(iso(before.until), "2026-03-28T08:00:00.000Z");
    const across = c.verdict(shop, at("2026-03-28T10:00:00Z"));
    assert.ok(!across.open);
    assert.equal(iso(across.until), "2026-03-29T07:00:00.000Z");
    assert.deepEqual(c.verdict(shop, at("2026-03-29T07:30:00Z")), { open: true });
    // Back to CET on Sunday 25 October 2026.
    const autumn = c.verdict(shop, at("2026-10-24T09:00:00Z"));
    assert.ok(!autumn.open);
    assert.equal(iso(autumn.until), "2026-10-25T08:00:00.000Z");
  });

  it("opens a window whose hour does not exist on the spring-forward day at the first valid time after the gap", () => {
    const c = calendar({ windows: [{ name: "late", kind: "allow", schedule: "30 2 * * *", duration: "30m", time_zone: "Europe/Paris" }] });
    // 02:30 does not exist in Paris on 29 March 2026 (02:00 CET becomes 03:00 CEST = 01:00 UTC).
    const v = c.verdict(shop, at("2026-03-28T12:00:00Z"));
    assert.ok(!v.open);
    assert.equal(iso(v.until), "2026-03-29T01:00:00.000Z");
  });

  it("lets a deny window win over an open allow window, and names it", () => {
    const c = calendar({
      windows: [
        { name: "office", kind: "allow", schedule: "0 9 * * *", duration: "8h" },
        { name: "lunch", kind: "deny", schedule: "0 12 * * *", duration: "1h", mode: "refuse" },
      ],
    });
    assert.deepEqual(c.verdict(shop, at("2026-06-01T11:59:00Z")), { open: true });
    const lunch = c.verdict(shop, at("2026-06-01T12:30:00Z"));
    assert.ok(!lunch.open);
    assert.equal(lunch.rule, "deny window lunch");
    assert.equal(lunch.mode, "refuse");
    assert.equal(iso(lunch.until), "2026-06-01T13:00:00.000Z");
  });

  it("looks past a deny window that outlasts the allow window to the next allow window", () => {
    const c = calendar({
      windows: [
        { name: "office", kind: "allow", schedule: "0 9 * * *", duration: "8h" },
        { name: "change-freeze", kind: "deny", schedule: "0 8 * * *", duration: "10h" },
      ],
    });
    const v = c.verdict(shop, at("2026-06-01T10:00:00Z"));
    assert.ok(!v.open);
    assert.equal(v.rule, "deny window change-freeze");
    // 18:00 the deny window ends, but office closed at 17:00 and the next day's deny opens at 08:00 before office at 09:00.
    assert.equal(v.until, null);
  });

  it("holds deploys during a freeze in its scope until its end, with its reason", () => {
    const c = calendar({
      freezes: [
        {
          name: "year-end",
          start: "2026-12-20T00:00:00+01:00",
          end: "2027-01-04T08:00:00+01:00",
          reason: "Year-end sales",
          environment: "prod*",
        },
      ],
    });
    const v = c.verdict(shop, at("2026-12-24T12:00:00Z"));
    assert.ok(!v.open);
    assert.equal(v.rule, "freeze year-end: Year-end sales");
    assert.equal(iso(v.until), "2027-01-04T07:00:00.000Z");
    assert.deepEqual(c.verdict({ ...shop, environment: "staging" }, at("2026-12-24T12:00:00Z")), { open: true });
    assert.deepEqual(c.verdict(shop, at("2027-01-04T07:00:00Z")), { open: true });
  });

  it("chains overlapping closures: a freeze ending inside a deny window waits for the window's end", () => {
    const c = calendar({
      windows: [{ name: "nights", kind: "deny", schedule: "0 22 * * *", duration: "10h", time_zone: "UTC" }],
      freezes: [{ name: "audit", start: "2026-06-01T00:00:00Z", end: "2026-06-01T23:00:00Z", reason: "SOX audit" }],
    });
    const v = c.verdict(shop, at("2026-06-01T12:00:00Z"));
    assert.ok(!v.open);
    assert.equal(v.rule, "freeze audit: SOX audit");
    assert.equal(iso(v.until), "2026-06-02T08:00:00.000Z");
  });

  it("refuses bad cron, unknown time zones, zero or negative durations and a freeze ending before it starts, naming file and field", async () => {
    const ws = await createWorkspace();
    const file = join(ws.dir, "manent.yml");
    const window = { name: "w", kind: "allow", schedule: "0 9 * * *", duration: "1h" };
    const freeze = { name: "f", start: "2026-12-20T00:00:00Z", end: "2026-12-21T00:00:00Z", reason: "r" };
    for (const [settings, field, reason] of [
      [{ windows: [{ ...window, schedule: "61 * * * *" }] }, "deploy_windows.windows.0.schedule", /is not a cron expression.*minute/],
      [{ windows: [{ ...window, schedule: "0 9 * *" }] }, "deploy_windows.windows.0.schedule", /is not a cron expression/],
      [{ windows: [{ ...window, schedule: "0 0 30 2 *" }] }, "deploy_windows.windows.0.schedule", /names no time/],
      [{ windows: [{ ...window, time_zone: "Mars/Olympus" }] }, "deploy_windows.windows.0.time_zone", /not an IANA time zone/],
      [{ windows: [{ ...window, duration: "0" }] }, "deploy_windows.windows.0.duration", /more than 0/],
      [{ windows: [{ ...window, duration: -5 }] }, "deploy_windows.windows.0.duration", /./],
      [{ windows: [{ ...window, duration: "-1h" }] }, "deploy_windows.windows.0.duration", /is not a duration/],
      [{ windows: [{ ...window, kind: "maybe" }] }, "deploy_windows.windows.0.kind", /./],
      [{ windows: [{ ...window, mode: "later" }] }, "deploy_windows.windows.0.mode", /./],
      [{ freezes: [{ ...freeze, end: "2026-12-19T00:00:00Z" }] }, "deploy_windows.freezes.0.end", /must be after start/],
      [{ freezes: [{ ...freeze, start: "2026-12-20 00:00" }] }, "deploy_windows.freezes.0.start", /./],
      [{ freezes: [{ ...freeze, start: "2026-12-20T00:00:00" }] }, "deploy_windows.freezes.0.start", /./],
      [{ freezes: [{ ...freeze, reason: "" }] }, "deploy_windows.freezes.0.reason", /./],
    ] as const) {
      await writeFile(file, JSON.stringify({ deploy_windows: settings }));
      await assert.rejects(loadManentConfig(file, ws.dir), (err: Error) => {
        assert.ok(err.message.includes(`manent.yml: ${field}`), `${err.message} names ${field}`);
        assert.match(err.message, reason);
        return true;
      });
    }
  });
});
