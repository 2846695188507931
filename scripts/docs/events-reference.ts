import { deployEventTypes } from "../../src/core/engine/deploy-events.js";

/** The event streams' types and the keys of their `data`, from `deployEventTypes`. */
export function eventsReference(): string {
  const rows = Object.entries(deployEventTypes).map(
    ([type, t]) => `| \`${type}\` | ${t.data.map((k) => `\`${k}\``).join(", ")} | ${t.about}. |`,
  );
  return [
    "Each message of `GET /api/v1/deploys/{id}/events` and `GET /api/v1/events` (server-sent events) is",
    "one event: an `id:` line (the event's sequence number, to resume from with `Last-Event-ID`) and a",
    "`data:` line holding the event as JSON:",
    "",
    "```json",
    '{"id": 42, "at": "2026-12-01T10:00:00.000Z", "tenant": "team-a", "deploy_id": "<id>", "type": "step.started",',
    ' "data": {"name": "fetch", "seq": 2, "attempt": 1, "started_at": "2026-12-01T10:00:00.000Z"}}',
    "```",
    "",
    "Events carry absolute states (a target's status, the whole rollout), so applying one twice changes",
    "nothing, and an unknown type can be ignored. Times are RFC 3339; a deploy's or a step's `error` is",
    "`{code, message, details?}` as in the [HTTP API](http-api.md). A caller gets the events of the",
    "deploys it may read only.",
    "",
    "| Type | Keys of `data` | Meaning |",
    "|---|---|---|",
    ...rows,
  ].join("\n");
}
