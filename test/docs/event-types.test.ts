import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { deployEventTypes } from "../../src/core/engine/deploy-events.js";
import type { StepStatus } from "../../src/core/engine/deploy-store.js";
import { eventStatements } from "../../src/storage/events-schema.js";
import { schemaStatements } from "../../src/storage/schema.js";
import { driftEvent } from "../../src/storage/pg-drift-store.js";
import { releaseStatements } from "../../src/storage/pg-release-store.js";
import { notificationEvents } from "../../src/storage/pg-notification-store.js";
import { eventHubStatements } from "../../src/storage/pg-event-hub.js";

/**
 * The event types docs/reference/events.md lists (generated from `deployEventTypes`) are the ones
 * the database triggers write, with the same keys in `data`: read from the triggers' SQL (and the
 * drift checks' own event).
 */

/** The statuses a finished step attempt is written with (`'step.' || new.status`): every one but running. */
const stepEnds = ["succeeded", "failed", "skipped"] as const;
// Fails to compile when StepStatus gains a status this list does not name.
const allStepEnds: [Exclude<StepStatus, "running" | (typeof stepEnds)[number]>] extends [never] ? true : false = true;

/** The keys of the first `jsonb_build_object(...)` at or after `from`. */
function objectKeys(sql: string, from: number): string[] {
  const start = sql.indexOf("jsonb_build_object(", from);
  assert.ok(start >= 0, `no jsonb_build_object after ${sql.slice(from, from + 60)}`);
  let depth = 0;
  let end = start + "jsonb_build_object".length;
  for (; end < sql.length; end++) {
    if (sql[end] === "(") depth++;
    else if (sql[end] === ")" && --depth === 0) break;
  }
  // Arguments alternate key, value (split at the commas outside parentheses); a jsonb column is
  // added after the object, to the end of its statement, as jsonb_key_unless_null('key', …).
  const args: string[] = [];
  let arg = "";
  depth = 0;
  for (const c of sql.slice(start + "jsonb_build_object(".length, end)) {
    if (c === "," && depth === 0) {
      args.push(arg.trim());
      arg = "";
      continue;
    }
    if (c === "(") depth++;
    else if (c === ")") depth--;
    arg += c;
  }
  args.push(arg.trim());
  const keys = args.filter((_, i) => i % 2 === 0).map((k) => /^'([a-z_][a-z0-9_]*)'$/.exec(k)?.[1] ?? assert.fail(`not a key: ${k}`));
  // The rest of its statement, or of its SQL function's body (which has no semicolon).
  const rest = sql.slice(end, Math.min(...[";", "$$"].map((x) => sql.indexOf(x, end)).filter((i) => i >= 0)));
  keys.push(...[...rest.matchAll(/jsonb_key_unless_null\('([a-z_][a-z0-9_]*)',/g)].map((m) => m[1]!));
  return [...new Set(keys)];
}

describe("event types", () => {
  const sql = [...eventStatements, ...releaseStatements].join("\n");
  const commandsFn = eventStatements.find((s) => s.includes("manent.command_events()") && s.includes("language plpgsql"))!;
  const commandsTable = schemaStatements.find((s) => s.includes("create table if not exists manent.deploy_commands"))!;
  const commandColumns = [...commandsTable.matchAll(/^\s+([a-z_]+) [a-z]/gm)]
    .map((m) => m[1]!)
    .filter((c) => c !== "deploy_id" && c !== "primary");

  /** type -> keys of data, as the triggers write them. */
  const written = new Map<string, string[]>();
  for (const m of sql.matchAll(/'([a-z]+\.[a-z_]+)'/g)) {
    const type = m[1]!;
    if (type.startsWith("manent.")) continue; // a table's name
    written.set(type, commandsFn.includes(`'${type}'`) ? commandColumns : objectKeys(sql, m.index));
  }
  // A step's end is 'step.' || its status; its keys as readers get them are event_data's for every
  // step.* type but step.started when stored as a row (the trigger leaves out the null ones and the
  // step's seq), and the event log's when its step's row still shows it (pg-event-hub.ts).
  const stepEnd = sql.indexOf("when p_type like 'step.%'");
  const stepStart = sql.indexOf("when 'step.started' then");
  assert.ok(stepEnd >= 0 && stepStart >= 0 && allStepEnds);
  for (const s of stepEnds) written.set(`step.${s}`, objectKeys(sql, stepEnd));
  written.set("step.started", objectKeys(sql, stepStart));
  // A deploy.created's keys are those its deploy's row gives (deploy_created_data), read by event_data
  // for a stored one and by the event log for one its row shows.
  const createdData = sql.indexOf("function manent.deploy_created_data");
  assert.ok(createdData >= 0);
  written.set("deploy.created", objectKeys(sql, createdData));
  // The events a row shows (a deploy's creation, start and last status, a step's start and end, a
  // target's result): read from the row through the event log (pg-event-hub.ts) while it shows
  // them, stored as these expressions give them when the row changes (a creation: never).
  const log = eventHubStatements.find((s) => s.includes("view manent.event_log"))!;
  const shown = [
    { type: "deploy.status", stored: "values (old.start_event,", read: "select d.start_event," },
    { type: "deploy.status", stored: "function manent.deploy_status_data", read: "select d.status_event," },
    { type: "step.started", stored: "function manent.step_started_data", read: "'step.started'" },
    { type: "step.succeeded", stored: "function manent.step_ended_data", read: "'step.' || s.status" },
    { type: "target.updated", stored: "function manent.target_event_data", read: "'target.updated'" },
  ].map((r) => {
    const stored = r.stored === undefined ? undefined : sql.indexOf(r.stored);
    const read = log.indexOf(r.read);
    assert.ok(stored !== -1 && read >= 0, r.type);
    return { type: r.type, about: r.read, stored: stored === undefined ? [] : objectKeys(sql, stored), read: objectKeys(log, read) };
  });
  // Appended by the drift checks with their rows, not by a trigger.
  written.set(driftEvent.type, [...driftEvent.data]);
  // Appended by the notifications' outbox when a delivery ends.
  for (const e of Object.values(notificationEvents)) written.set(e.type, [...e.data]);

  it("documents every type the triggers write, and no other", () => {
    assert.deepEqual(Object.keys(deployEventTypes).sort(), [...written.keys()].sort());
  });

  it("deploy.created: stored and as a row shows it, read as its row gives it", () => {
    assert.match(
      sql,
      /when 'deploy\.created' then[^]*?\(select manent\.deploy_created_data\(d\) from manent\.deploys d where d\.id = p_deploy_id\)/,
    );
    const part = log.slice(log.indexOf("select d.created_event,"));
    assert.match(
      part.slice(0, part.indexOf("union all")),
      /'deploy\.created',\s+manent\.deploy_created_data\(d\) \|\| '\{"status": "queued"\}'::jsonb/,
    );
  });

  for (const r of shown) {
    it(`${r.type} as a row shows it (${r.about}): stored with no key readers do not get, read with every key`, () => {
      if (r.type === "step.succeeded") assert.ok(r.stored.includes("error"), r.stored.join());
      for (const k of r.stored) assert.ok(written.get(r.type)!.includes(k), k);
      assert.deepEqual([...r.read].sort(), [...written.get(r.type)!].sort());
    });
  }

  for (const [type, keys] of written) {
    it(`${type}: documents the keys of data the trigger writes`, () => {
      const documented = (deployEventTypes as Record<string, { data: readonly string[] }>)[type]?.data ?? [];
      assert.deepEqual([...documented].sort(), [...keys].sort());
    });
  }
});
